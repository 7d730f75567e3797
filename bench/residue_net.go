//go:build linux

package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// residueProbe reads what a network backend keeps on its server: the
// objects (keys, rows, znodes) and, where the server reports it, its
// memory.
type residueProbe struct {
	what    string // "keys", "rows", "znodes"
	objects func(ctx context.Context) (int64, error)
	memory  func(ctx context.Context) (int64, error) // nil: not reported
}

// residueWait is the longest a residue run waits for the backend to give
// back the state of the names: the sweep of mysqllock runs a TTL (10 s by
// default) and a quarter after the last release.
const residueWait = 20 * time.Second

// residueTable plans the table id: n distinct names, open+Lock+Unlock+Close
// each, then the objects left right after and after waiting until they are
// back to what there was before (at most residueWait), and the growth of
// the server's memory after the wait.
func residueTable(id, section, title string, n int, subs []*subject, probes map[string]residueProbe) *plannedTable {
	t := newPlanned(id, section, title, "memory", "mutex", nil, subs, func(ctx context.Context, s *subject) (sample, error) {
		p, ok := probes[s.id]
		if !ok {
			return sample{}, fmt.Errorf("no residue probe for %s", s.id)
		}
		return residueRun(ctx, s, n, p)
	})
	// A run is n round trips or more, and the wait: a full pass's
	// 100,000 names on ZooKeeper or MariaDB outlast the usual bound.
	t.extra = time.Duration(n)*residuePerName + residueWait
	return t
}

// residuePerName bounds the time of one name's open, Lock, Unlock and
// Close on a loaded machine, for the run's time limit.
const residuePerName = 2 * time.Millisecond

func residueTitle(backend, what string, n int) string {
	return fmt.Sprintf("%s residue: %s left after %d distinct names (open, Lock, Unlock, Close each), right after and once given back", backend, what, n)
}

func residueRun(ctx context.Context, s *subject, n int, p residueProbe) (sample, error) {
	before, err := p.objects(ctx)
	if err != nil {
		return sample{}, err
	}
	mem0 := int64(-1)
	if p.memory != nil {
		if mem0, err = p.memory(ctx); err != nil {
			return sample{}, err
		}
	}
	run := freshRuns.Add(1)
	if _, err := openCycles(ctx, s, n, func(i int) string { return fmt.Sprintf("residue-%s-%d-%d", s.id, run, i) }); err != nil {
		return sample{}, err
	}
	after, err := p.objects(ctx)
	if err != nil {
		return sample{}, err
	}
	t0 := time.Now()
	left := after
	for left > before && time.Since(t0) < residueWait {
		time.Sleep(100 * time.Millisecond)
		if left, err = p.objects(ctx); err != nil {
			return sample{}, err
		}
	}
	smp := sample{Ops: int64(n), Seconds: time.Since(t0).Seconds(), Left: max(after-before, 0), LeftAfterWait: max(left-before, 0), Bytes: -1}
	if p.memory != nil {
		mem1, err := p.memory(ctx)
		if err != nil {
			return sample{}, err
		}
		smp.Bytes = max(mem1-mem0, 0)
	}
	return smp, nil
}

// redisProbe counts the keys of the servers of cs and sums their
// used_memory.
func redisProbe(cs ...*redis.Client) residueProbe {
	return residueProbe{what: "keys",
		objects: func(ctx context.Context) (int64, error) {
			var n int64
			for _, c := range cs {
				k, err := c.DBSize(ctx).Result()
				if err != nil {
					return 0, err
				}
				n += k
			}
			return n, nil
		},
		memory: func(ctx context.Context) (int64, error) {
			var n int64
			for _, c := range cs {
				info, err := c.Info(ctx, "memory").Result()
				if err != nil {
					return 0, err
				}
				for _, line := range strings.Split(info, "\n") {
					if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
						k, err := strconv.ParseInt(v, 10, 64)
						if err != nil {
							return 0, err
						}
						n += k
					}
				}
			}
			return n, nil
		}}
}

// etcdProbe counts every key of the cluster; etcd reports no memory of its
// own per key.
func etcdProbe(c *clientv3.Client) residueProbe {
	return residueProbe{what: "keys", objects: func(ctx context.Context) (int64, error) {
		r, err := c.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return r.Count, nil
	}}
}

// pgProbe counts pglock's lease rows (but the marker) and Cond rows, and
// sums pg_total_relation_size of baton's tables.
func pgProbe(url string) residueProbe {
	one := func(ctx context.Context, q string) (int64, error) {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return 0, err
		}
		defer c.Close(ctx)
		var n int64
		err = c.QueryRow(ctx, q).Scan(&n)
		return n, err
	}
	return residueProbe{what: "rows",
		objects: func(ctx context.Context) (int64, error) {
			return one(ctx, `SELECT (SELECT count(*) FROM baton_leases WHERE kind <> '') + (SELECT count(*) FROM baton_cond)`)
		},
		memory: func(ctx context.Context) (int64, error) {
			return one(ctx, `SELECT COALESCE(sum(pg_total_relation_size(oid)), 0)::bigint FROM pg_class
				WHERE relname LIKE 'baton\_%' AND relkind IN ('r', 'u', 'p')`)
		}}
}

// mysqlProbe counts mysqllock's Mutex and RWMutex rows, hold rows and Cond
// rows; InnoDB reports no memory per table.
func mysqlProbe(dsn string) residueProbe {
	return residueProbe{what: "rows", objects: func(ctx context.Context) (int64, error) {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return 0, err
		}
		defer db.Close()
		var n int64
		err = db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM baton_lock WHERE name LIKE 'm:%' OR name LIKE 'r:%')"+
			" + (SELECT COUNT(*) FROM baton_hold) + (SELECT COUNT(*) FROM baton_cond)").Scan(&n)
		return n, err
	}}
}

// zkProbe counts the znodes under root; ZooKeeper reports no memory per
// znode.
func zkProbe(c *zk.Conn, root string) residueProbe {
	var count func(p string) (int64, error)
	count = func(p string) (int64, error) {
		kids, _, err := c.Children(p)
		if err == zk.ErrNoNode {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		n := int64(len(kids))
		for _, k := range kids {
			m, err := count(strings.TrimSuffix(p, "/") + "/" + k)
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	}
	return residueProbe{what: "znodes", objects: func(context.Context) (int64, error) { return count(root) }}
}
