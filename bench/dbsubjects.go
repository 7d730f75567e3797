//go:build linux

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/mysqllock"
	"github.com/batonlock/baton/cluster/pglock"
	"github.com/batonlock/baton/cluster/zklock"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
)

// dbEnv holds the PostgreSQL, MariaDB and ZooKeeper servers of a run and
// their subjects. A server that cannot start leaves its subjects in place,
// failing with the reason, so that the tables report it.
type dbEnv struct {
	servers  []*dbServer
	closers  []func() error
	subjects map[string][]*subject // by section
	cpu      map[string]func() time.Duration
	probes   map[string]residueProbe // by subject id: what the server keeps
}

// failing is a subject every open of which fails with err.
func failing(name, id, kind string, isBaton bool, err error) *subject {
	open := func(context.Context, string) (mutexH, error) { return nil, err }
	return &subject{name: name, id: id, kind: kind, baton: isBaton, mutex: open, client: open}
}

func openDBEnv(ctx context.Context, want map[string]bool, logf func(string, ...any)) *dbEnv {
	de := &dbEnv{subjects: map[string][]*subject{}, cpu: map[string]func() time.Duration{}, probes: map[string]residueProbe{}}
	if want["postgres"] {
		de.subjects["postgres"] = de.postgres(ctx, logf)
	}
	if want["mysql"] {
		de.subjects["mysql"] = de.mysql(ctx, logf)
	}
	if want["zookeeper"] {
		de.subjects["zookeeper"] = de.zookeeper(ctx, logf)
	}
	return de
}

func (de *dbEnv) close() {
	for i := len(de.closers) - 1; i >= 0; i-- {
		_ = de.closers[i]()
	}
	de.closers = nil
	for _, s := range de.servers {
		s.stop()
	}
	de.servers = nil
}

// lockKey maps a name to a 64-bit advisory lock key.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// rawPG is the PostgreSQL floor: pg_advisory_lock and pg_advisory_unlock
// on one connection of its own, nothing else.
type rawPG struct {
	c   *pgx.Conn
	key int64
}

func (r *rawPG) lock(ctx context.Context) error {
	_, err := r.c.Exec(ctx, "SELECT pg_advisory_lock($1)", r.key)
	return err
}

func (r *rawPG) unlock(ctx context.Context) error {
	var ok bool
	if err := r.c.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", r.key).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return errors.New("raw pg: lock not held")
	}
	return nil
}

func (r *rawPG) close() error { return r.c.Close(context.Background()) }

func (de *dbEnv) postgres(ctx context.Context, logf func(string, ...any)) []*subject {
	const raw, bn = "raw pg_advisory_lock", "baton pglock"
	fail := func(err error) []*subject {
		err = fmt.Errorf("postgres: %w", err)
		return []*subject{failing(raw, "rawpg", "postgres", false, err), failing(bn, "bpg", "postgres", true, err)}
	}
	s, url, err := startPostgres(ctx)
	if err != nil {
		return fail(err)
	}
	de.servers = append(de.servers, s)
	de.cpu["postgres"] = s.cpu
	logf("postgres on %s", s.addr)
	b, err := pglock.OpenURL(ctx, url)
	if err != nil {
		return fail(err)
	}
	de.closers = append(de.closers, b.Close)
	de.probes["bpg"] = pgProbe(url)
	return []*subject{
		{name: raw, id: "rawpg", kind: "postgres",
			mutex: func(ctx context.Context, key string) (mutexH, error) {
				c, err := pgx.Connect(ctx, url)
				if err != nil {
					return nil, err
				}
				return &rawPG{c: c, key: lockKey("rawpg-" + key)}, nil
			}},
		withClients(batonSubject(bn, "bpg", "postgres", false, b, true, false, false),
			func() (baton.Backend, error) { return pglock.OpenURL(ctx, url) }),
	}
}

// rawMySQL is the MySQL/MariaDB floor: GET_LOCK and RELEASE_LOCK on one
// connection of its own.
type rawMySQL struct {
	db   *sql.DB
	c    *sql.Conn
	name string
}

func (r *rawMySQL) lock(ctx context.Context) error {
	for {
		var got sql.NullInt64
		if err := r.c.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", r.name).Scan(&got); err != nil {
			return err
		}
		if got.Valid && got.Int64 == 1 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (r *rawMySQL) unlock(ctx context.Context) error {
	var ok sql.NullInt64
	if err := r.c.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", r.name).Scan(&ok); err != nil {
		return err
	}
	if !ok.Valid || ok.Int64 != 1 {
		return errors.New("raw mysql: lock not held")
	}
	return nil
}

func (r *rawMySQL) close() error { return errors.Join(r.c.Close(), r.db.Close()) }

func (de *dbEnv) mysql(ctx context.Context, logf func(string, ...any)) []*subject {
	const raw, bn = "raw GET_LOCK", "baton mysqllock"
	fail := func(err error) []*subject {
		err = fmt.Errorf("mariadb: %w", err)
		return []*subject{failing(raw, "rawmy", "mysql", false, err), failing(bn, "bmy", "mysql", true, err)}
	}
	s, dsn, err := startMariaDB(ctx)
	if err != nil {
		return fail(err)
	}
	de.servers = append(de.servers, s)
	de.cpu["mysql"] = s.cpu
	logf("mariadb on %s", s.addr)
	url := "mysql://root@" + s.addr + "/baton"
	b, err := mysqllock.OpenURL(ctx, url)
	if err != nil {
		return fail(err)
	}
	de.closers = append(de.closers, b.Close)
	de.probes["bmy"] = mysqlProbe("root@tcp(" + s.addr + ")/baton")
	return []*subject{
		{name: raw, id: "rawmy", kind: "mysql",
			mutex: func(ctx context.Context, key string) (mutexH, error) {
				// A pool of its own per handle: the lock belongs to the
				// connection, which the handle keeps.
				db, c, err := ownConn(ctx, dsn)
				if err != nil {
					return nil, err
				}
				return &rawMySQL{db: db, c: c, name: "rawmy-" + key}, nil
			}},
		withClients(batonSubject(bn, "bmy", "mysql", false, b, true, false, false),
			func() (baton.Backend, error) { return mysqllock.OpenURL(ctx, url) }),
	}
}

type nopZKLog struct{}

func (nopZKLog) Printf(string, ...any) {}

func zkConnect(addr string) (*zk.Conn, error) {
	c, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopZKLog{}))
	if err != nil {
		return nil, err
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.State == zk.StateHasSession {
				go func() {
					for range ev { // the channel must be drained
					}
				}()
				return c, nil
			}
		case <-timeout:
			c.Close()
			return nil, errors.New("zookeeper: no session within 10s")
		}
	}
}

// zkRecipe is a handle on the client library's own lock recipe.
type zkRecipe struct {
	l    *zk.Lock
	conn *zk.Conn // owned by the handle when set
}

func (z zkRecipe) lock(context.Context) error   { return z.l.Lock() }
func (z zkRecipe) unlock(context.Context) error { return z.l.Unlock() }
func (z zkRecipe) close() error {
	if z.conn != nil {
		z.conn.Close()
	}
	return nil
}

func (de *dbEnv) zookeeper(ctx context.Context, logf func(string, ...any)) []*subject {
	const peer, bn = "zk.NewLock", "baton zklock"
	fail := func(err error) []*subject {
		err = fmt.Errorf("zookeeper: %w", err)
		return []*subject{failing(peer, "zkrecipe", "zookeeper", false, err), failing(bn, "bzk", "zookeeper", true, err)}
	}
	s, err := startZooKeeper()
	if err != nil {
		return fail(err)
	}
	de.servers = append(de.servers, s)
	de.cpu["zookeeper"] = s.cpu
	logf("zookeeper on %s", s.addr)
	shared, err := zkConnect(s.addr)
	if err != nil {
		return fail(err)
	}
	de.closers = append(de.closers, func() error { shared.Close(); return nil })
	url := "zk://" + s.addr + "/baton-bench"
	b, err := zklock.OpenURL(ctx, url)
	if err != nil {
		return fail(err)
	}
	de.closers = append(de.closers, b.Close)
	de.probes["bzk"] = zkProbe(shared, "/baton-bench")
	acl := zk.WorldACL(zk.PermAll)
	return []*subject{
		{name: peer, id: "zkrecipe", kind: "zookeeper",
			mutex: func(ctx context.Context, key string) (mutexH, error) {
				return zkRecipe{l: zk.NewLock(shared, "/zkrecipe/"+key, acl)}, nil
			},
			// A client of its own: a session (connection) per handle.
			client: func(ctx context.Context, key string) (mutexH, error) {
				c, err := zkConnect(s.addr)
				if err != nil {
					return nil, err
				}
				return zkRecipe{l: zk.NewLock(c, "/zkrecipe/"+key, acl), conn: c}, nil
			}},
		withClients(batonSubject(bn, "bzk", "zookeeper", false, b, true, false, false),
			func() (baton.Backend, error) { return zklock.OpenURL(ctx, url) }),
	}
}

// dbSections are the sections of dbEnv: table id prefix and title.
var dbSections = []struct{ name, prefix, title, what string }{
	{"postgres", "pg-", "PostgreSQL", "PostgreSQL mutex"},
	{"mysql", "mysql-", "MySQL/MariaDB", "MariaDB mutex"},
	{"zookeeper", "zk-", "ZooKeeper", "ZooKeeper mutex"},
}

// planDB lists the tables of the selected database sections.
func planDB(cfg config, de *dbEnv, he *hostEnv, want map[string]bool) []*plannedTable {
	var ts []*plannedTable
	g := cfg.gs[len(cfg.gs)-1]
	for _, sec := range dbSections {
		subs := de.subjects[sec.name]
		if !want[sec.name] || len(subs) == 0 {
			continue
		}
		refs := []string{subs[0].name}
		extra := de.cpu[sec.name]
		id := func(s string) string { return sec.prefix + s }
		ts = append(ts, networked(
			newPlanned(id("uncontended"), sec.title, sec.what+", uncontended Lock+Unlock", "throughput", "mutex",
				refs, subs, uncontendedRun("mutex", "uncontended", 0, cfg, extra)).twin(subs[0].name),
			newPlanned(id(fmt.Sprintf("g%d", g)), sec.title, fmt.Sprintf("%s, %d goroutines on one name (one handle each)", sec.what, g), "throughput", "mutex",
				refs, subs, contendedRun("mutex", fmt.Sprintf("g%d", g), g, 0, 0, cfg, extra)),
			newPlanned(id(fmt.Sprintf("c%d", g)), sec.title, fmt.Sprintf("%s, %d clients on one name (a Backend each)", sec.what, g), "throughput", "mutex",
				refs, subs, contendedRun("client", fmt.Sprintf("c%d", g), g, 0, 0, cfg, extra)),
			newPlanned(id("handoff"), sec.title, sec.what+" handoff: holder's Unlock to the blocked waiter (another client) holding", "latency", "mutex",
				refs, subs, handoffRun("handoff", cfg.handoffs, 5*time.Millisecond)),
		)...)
		// A baton subject with a probe is one whose server runs: without
		// it, the open and residue tables would measure only the
		// references.
		if bs := pick(subs, func(s *subject) bool { return s.baton && de.probes[s.id].objects != nil }); len(bs) > 0 {
			ts = append(ts, openNetTables(cfg, he, sec.prefix, sec.title, sec.what, subs)...)
			ts = append(ts, residueTable(id("residue"), sec.title, residueTitle(sec.title, de.probes[bs[0].id].what, cfg.residue), cfg.residue, bs, de.probes))
		}
	}
	return ts
}

// ownConn opens a pool of its own on dsn and takes its one connection.
func ownConn(ctx context.Context, dsn string) (*sql.DB, *sql.Conn, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, nil, err
	}
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, c, nil
}
