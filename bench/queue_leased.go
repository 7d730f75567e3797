//go:build linux

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Leased floors: the raw requests of a claim that holds its job under a
// lease and gives a fencing token, and of an Ack that ends it, with the
// Put of the plain floor. The plain floor deletes a job as it claims it,
// so a worker that dies with it loses the job; a queue with baton's
// guarantees writes the claim and then the Ack. Beside the plain floor,
// this row says what that guarantee costs on the server; beside baton,
// what baton adds to the requests the guarantee needs.

const (
	etcdFloorName   = "raw Put + Get + Txn (etcd)"
	pgLeasedName    = "raw leased claim (pgx)"
	mysqlLeasedName = "raw leased claim (MariaDB)"
	etcdLeasedName  = "raw leased claim (etcd)"
	zkLeasedName    = "raw leased claim (ZooKeeper)"

	pgLeasedDesc    = "one statement that takes the oldest ready row FOR UPDATE SKIP LOCKED, draws a token from the queue's row and writes the claim with its lease; the Ack's DELETE"
	mysqlLeasedDesc = "START TRANSACTION + SELECT … FOR UPDATE SKIP LOCKED; the token's UPDATE, the claim's UPDATE + COMMIT; the Ack's DELETE"
	etcdLeasedDesc  = "a Get of the oldest job; a Txn putting its claim key under a lease if the job is unchanged and unclaimed (the token: its revision); the Ack's Txn deleting both"
	zkLeasedDesc    = "getChildren and a get of the oldest job; a multi-op of its versioned setData (the token: its zxid) and an ephemeral claim znode; the Ack's multi-op deleting both"
)

// pgLeased claims in one statement, the token from a row per queue.
type pgLeased struct{ *pgFloor }

const pgLeasedSchema = `CREATE TABLE IF NOT EXISTS bench_floor_tokens (queue text PRIMARY KEY, token bigint NOT NULL);`

func (p *pgLeased) claimAck(ctx context.Context) error {
	for {
		var id, token int64
		var payload []byte
		err := p.c.QueryRow(ctx, `WITH c AS (SELECT id FROM bench_floor_jobs WHERE queue = $1 AND state = 0 AND ready_at <= clock_timestamp()
	ORDER BY ready_at, id LIMIT 1 FOR UPDATE SKIP LOCKED),
t AS (INSERT INTO bench_floor_tokens SELECT $1, 1 FROM c ON CONFLICT (queue) DO UPDATE SET token = bench_floor_tokens.token + 1 RETURNING token)
UPDATE bench_floor_jobs j SET state = 1, attempts = j.attempts + 1, token = t.token, lease_until = clock_timestamp() + interval '30 seconds'
FROM c, t WHERE j.id = c.id RETURNING j.id, j.payload, j.token`, p.queue).Scan(&id, &payload, &token)
		if errors.Is(err, pgx.ErrNoRows) {
			if err := sleepCtx(ctx, time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		_, err = p.c.Exec(ctx, `DELETE FROM bench_floor_jobs WHERE id = $1 AND token = $2 AND state = 1`, id, token)
		return err
	}
}

// mysqlLeased claims with the token's counter and an owner and expiry
// written in the job's row.
type mysqlLeased struct {
	*mysqlFloor
	owner string
}

const mysqlLeasedSchema = `CREATE TABLE IF NOT EXISTS bench_floor_tokens (queue VARBINARY(255) PRIMARY KEY, token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`

func (m *mysqlLeased) claimAck(ctx context.Context) error {
	for {
		id, found, err := m.pick(ctx, " AND expires <= NOW(6)")
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		var token uint64
		err = mysqlRows(ctx, m.c, `INSERT INTO bench_floor_tokens VALUES (?, LAST_INSERT_ID(1)) ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1);
UPDATE bench_floor_jobs SET owner = ?, expires = NOW(6) + INTERVAL 30 SECOND, token = LAST_INSERT_ID(), attempts = attempts + 1 WHERE queue = ? AND id = ?;
COMMIT; SELECT LAST_INSERT_ID()`, []any{m.queue, m.owner, m.queue, id}, func(r *sql.Rows) error { return r.Scan(&token) })
		if err != nil {
			return err
		}
		if token == 0 {
			return errors.New("leased floor: no token")
		}
		_, err = m.c.ExecContext(ctx, `DELETE FROM bench_floor_jobs WHERE queue = ? AND id = ? AND owner = ?`, m.queue, id, m.owner)
		return err
	}
}

// mysqlRows runs a request of several statements and scans the rows of
// the result sets that have them.
func mysqlRows(ctx context.Context, c *sql.Conn, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	for {
		for rows.Next() {
			if err := scan(rows); err != nil {
				rows.Close()
				return err
			}
		}
		if !rows.NextResultSet() {
			break
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}

// etcdLeased claims with a key bound to a lease of its own client.
type etcdLeased struct {
	*etcdFloor
	lease clientv3.LeaseID
}

func (e *etcdLeased) claimAck(ctx context.Context) error {
	for {
		kv, err := e.oldest(ctx)
		if err != nil {
			return err
		}
		if kv == nil {
			continue
		}
		ck := "/bench-queue-claims" + string(kv.Key)
		t, err := e.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision),
			clientv3.Compare(clientv3.CreateRevision(ck), "=", 0)).
			Then(clientv3.OpPut(ck, e.me, clientv3.WithLease(e.lease))).Commit()
		if err != nil {
			return err
		}
		if !t.Succeeded {
			continue
		}
		t, err = e.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(ck), "=", t.Header.Revision)).
			Then(clientv3.OpDelete(string(kv.Key)), clientv3.OpDelete(ck)).Commit()
		if err != nil {
			return err
		}
		if !t.Succeeded {
			return errors.New("leased floor: the claim was lost")
		}
		return nil
	}
}

func (e *etcdLeased) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.c.Revoke(ctx, e.lease)
	return err
}

func newEtcdLeased(ctx context.Context, c *clientv3.Client, queue string) (dbqClient, error) {
	l, err := c.Grant(ctx, 60)
	if err != nil {
		return nil, err
	}
	f := &etcdFloor{c: c, prefix: "/bench-queue-leased/" + queue + "/", me: strconv.FormatInt(etcdFloorSeq.Add(1), 16)}
	return &etcdLeased{etcdFloor: f, lease: l.ID}, nil
}

// zkLeased claims with an ephemeral znode of its session beside the job.
type zkLeased struct {
	*zkFloor
	claims string
}

func (z *zkLeased) claimAck(ctx context.Context) error {
	for {
		kids, _, err := z.c.Children(z.dir)
		if err != nil {
			return err
		}
		if len(kids) == 0 {
			if err := sleepCtx(ctx, time.Millisecond); err != nil {
				return err
			}
			continue
		}
		oldest := kids[0]
		for _, k := range kids[1:] {
			if k < oldest { // sequence numbers of one width sort as text
				oldest = k
			}
		}
		p, cp := z.dir+"/"+oldest, z.claims+"/"+oldest
		_, st, err := z.c.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		} else if err != nil {
			return err
		}
		res, err := z.c.Multi(&zk.SetDataRequest{Path: p, Data: dbqPayload, Version: st.Version},
			&zk.CreateRequest{Path: cp, Acl: z.acl, Flags: zk.FlagEphemeral})
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) {
			continue
		} else if err != nil {
			return err
		}
		if res[0].Stat == nil || res[0].Stat.Mzxid == 0 {
			return errors.New("leased floor: no token")
		}
		_, err = z.c.Multi(&zk.DeleteRequest{Path: p, Version: res[0].Stat.Version}, &zk.DeleteRequest{Path: cp, Version: -1})
		return err
	}
}

func newZKLeased(addr, queue string, acl []zk.ACL) (dbqClient, error) {
	c, err := zkConnect(addr)
	if err != nil {
		return nil, err
	}
	dir, claims := "/bench-queue-leased/"+queue, "/bench-queue-leased-claims/"+queue
	for _, p := range []string{"/bench-queue-leased", dir, "/bench-queue-leased-claims", claims} {
		if _, err := c.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			c.Close()
			return nil, fmt.Errorf("leased floor: %s: %w", p, err)
		}
	}
	return &zkLeased{zkFloor: &zkFloor{c: c, dir: dir, acl: acl}, claims: claims}, nil
}
