//go:build linux

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton/cluster/mysqllock"
	"github.com/batonlock/baton/cluster/pglock"
	"github.com/jackc/pgx/v5"
)

// The SQL floors: a job is a row, put by an INSERT; a claim is a
// transaction that takes the oldest ready row with SELECT … FOR UPDATE
// SKIP LOCKED and deletes it. Each client has one connection of its own,
// and sends BEGIN with the SELECT and the DELETE with COMMIT, so that the
// floor is three round trips, as few as those statements take.

const pgFloorDesc = "INSERT, then BEGIN + SELECT … FOR UPDATE SKIP LOCKED and DELETE + COMMIT with pgx, on a table of the shape of baton's"

// pgFloorSchema is baton_jobs' shape (pglock's jobs table), its indexes
// included, with the id drawn by the table's own sequence.
const pgFloorSchema = `
CREATE TABLE IF NOT EXISTS bench_floor_jobs (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL, payload bytea NOT NULL, ukey text,
	state smallint NOT NULL, ready_at timestamptz NOT NULL,
	attempts integer NOT NULL, max_attempts integer NOT NULL,
	token bigint, lease_until timestamptz, claimant integer,
	reason text, died timestamptz);
CREATE UNIQUE INDEX IF NOT EXISTS bench_floor_jobs_ukey ON bench_floor_jobs (queue, ukey) WHERE state < 2 AND ukey IS NOT NULL;
CREATE INDEX IF NOT EXISTS bench_floor_jobs_ready ON bench_floor_jobs (queue, ready_at, id) WHERE state = 0;
CREATE INDEX IF NOT EXISTS bench_floor_jobs_claimed ON bench_floor_jobs (queue, lease_until) WHERE state = 1;
CREATE INDEX IF NOT EXISTS bench_floor_jobs_dead ON bench_floor_jobs (queue, died, id) WHERE state = 2;
`

type pgFloor struct {
	c     *pgx.Conn
	queue string
}

func (p *pgFloor) put(ctx context.Context, n int) error {
	_, err := p.c.Exec(ctx, `INSERT INTO bench_floor_jobs (queue, payload, state, ready_at, attempts, max_attempts)
SELECT $1, $2, 0, clock_timestamp(), 0, 25 FROM generate_series(1, $3)`, p.queue, dbqPayload, n)
	return err
}

func (p *pgFloor) claimAck(ctx context.Context) error {
	for {
		var b pgx.Batch
		b.Queue("BEGIN")
		b.Queue(`SELECT id, payload FROM bench_floor_jobs WHERE queue = $1 AND state = 0 AND ready_at <= clock_timestamp()
ORDER BY ready_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`, p.queue)
		br := p.c.SendBatch(ctx, &b)
		_, err := br.Exec()
		var id int64
		var payload []byte
		if err == nil {
			err = br.QueryRow().Scan(&id, &payload)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if errors.Is(err, pgx.ErrNoRows) {
			// Every ready row is another client's: the floor has no
			// wake-up, so it looks again shortly.
			if _, err := p.c.Exec(ctx, "ROLLBACK"); err != nil {
				return err
			}
			if err := sleepCtx(ctx, time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		b = pgx.Batch{}
		b.Queue(`DELETE FROM bench_floor_jobs WHERE id = $1`, id)
		b.Queue("COMMIT")
		return p.c.SendBatch(ctx, &b).Close()
	}
}

func (p *pgFloor) close() error { return p.c.Close(context.Background()) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pgQueues returns the PostgreSQL queue rows, the floor first, and River.
func (de *dbEnv) pgQueues(ctx context.Context) ([]*dbqSubject, *dbqSubject) {
	const floor, bn = "raw SKIP LOCKED (pgx)", "baton pglock"
	s, err := de.server(ctx, "postgres", "postgres")
	if err != nil {
		return []*dbqSubject{dbqFailing(floor, "rawpgq", "postgres", false, err), dbqFailing(bn, "bpgq", "postgres", true, err),
				dbqFailing(pgLeasedName, "leasedpgq", "postgres", false, err)},
			dbqFailing(riverName, "river", "postgres", false, err)
	}
	url := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.addr)
	fail := func(err error) ([]*dbqSubject, *dbqSubject) {
		err = fmt.Errorf("postgres queues: %w", err)
		return []*dbqSubject{dbqFailing(floor, "rawpgq", "postgres", false, err), dbqFailing(bn, "bpgq", "postgres", true, err),
				dbqFailing(pgLeasedName, "leasedpgq", "postgres", false, err)},
			dbqFailing(riverName, "river", "postgres", false, err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return fail(err)
	}
	_, err = c.Exec(ctx, pgFloorSchema+pgLeasedSchema)
	c.Close(ctx)
	if err != nil {
		return fail(err)
	}
	b, err := pglock.OpenURL(ctx, url)
	if err != nil {
		return fail(err)
	}
	de.closers = append(de.closers, b.Close)
	river, err := de.riverSubject(ctx, url)
	if err != nil {
		return fail(err)
	}
	raw := &dbqSubject{s: &subject{name: floor, id: "rawpgq", kind: "postgres"},
		open: func(ctx context.Context, queue string) (dbqClient, error) {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				return nil, err
			}
			return &pgFloor{c: c, queue: queue}, nil
		}}
	leased := &dbqSubject{s: &subject{name: pgLeasedName, id: "leasedpgq", kind: "postgres"},
		open: func(ctx context.Context, queue string) (dbqClient, error) {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				return nil, err
			}
			return &pgLeased{&pgFloor{c: c, queue: queue}}, nil
		}}
	return []*dbqSubject{raw, dbqBatonSubject(bn, "bpgq", "postgres", b), leased}, river
}

const mysqlFloorDesc = "INSERT, then START TRANSACTION + SELECT … FOR UPDATE SKIP LOCKED and DELETE + COMMIT (each pair one multi-statement request), on a table of the shape of baton's"

// mysqlFloorSchema is mysqllock's job table's shape; the id is the
// table's AUTO_INCREMENT, which needs a key of its own.
const mysqlFloorSchema = `CREATE TABLE IF NOT EXISTS bench_floor_jobs (
	queue VARBINARY(255) NOT NULL,
	id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
	state TINYINT NOT NULL DEFAULT 0,
	ready_at DATETIME(6) NOT NULL,
	attempts INT NOT NULL DEFAULT 0,
	max_attempts INT NOT NULL,
	ukey VARBINARY(128) NULL,
	ukey_live VARBINARY(128) NULL,
	owner VARBINARY(64) NOT NULL DEFAULT '',
	expires DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
	token BIGINT UNSIGNED NOT NULL DEFAULT 0,
	reason VARBINARY(1024) NOT NULL DEFAULT '',
	died DATETIME(6) NULL,
	payload LONGBLOB NOT NULL,
	PRIMARY KEY (queue, id),
	KEY (id),
	UNIQUE KEY (queue, ukey_live),
	KEY (queue, state, ready_at, id)
) ENGINE=InnoDB`

type mysqlFloor struct {
	db    *sql.DB
	c     *sql.Conn
	queue string
}

func (m *mysqlFloor) put(ctx context.Context, n int) error {
	q := `INSERT INTO bench_floor_jobs (queue, state, ready_at, max_attempts, payload) VALUES `
	args := make([]any, 0, 2*n)
	for i := range n {
		if i > 0 {
			q += ", "
		}
		q += "(?, 0, NOW(6), 25, ?)"
		args = append(args, m.queue, dbqPayload)
	}
	_, err := m.c.ExecContext(ctx, q, args...)
	return err
}

func (m *mysqlFloor) claimAck(ctx context.Context) error {
	for {
		id, found, err := m.pick(ctx, "")
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		_, err = m.c.ExecContext(ctx, `DELETE FROM bench_floor_jobs WHERE queue = ? AND id = ?; COMMIT`, m.queue, id)
		return err
	}
}

// pick starts a transaction and takes the oldest ready row (with cond
// added to the ready ones' condition), reading its payload. Without one it
// ends the transaction and waits a moment; found false with a nil error
// then means look again.
func (m *mysqlFloor) pick(ctx context.Context, cond string) (id uint64, found bool, err error) {
	var payload []byte
	err = mysqlRows(ctx, m.c, `START TRANSACTION; SELECT id, payload FROM bench_floor_jobs
WHERE queue = ? AND state = 0 AND ready_at <= NOW(6)`+cond+` ORDER BY ready_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`,
		[]any{m.queue}, func(r *sql.Rows) error { found = true; return r.Scan(&id, &payload) })
	if err != nil || found {
		return id, found, err
	}
	if _, err := m.c.ExecContext(ctx, "ROLLBACK"); err != nil {
		return 0, false, err
	}
	return 0, false, sleepCtx(ctx, time.Millisecond)
}

func (m *mysqlFloor) close() error { return errors.Join(m.c.Close(), m.db.Close()) }

// mysqlQueues returns the MariaDB queue rows, the floor first.
func (de *dbEnv) mysqlQueues(ctx context.Context) []*dbqSubject {
	const floor, bn = "raw SKIP LOCKED (MariaDB)", "baton mysqllock"
	fail := func(err error) []*dbqSubject {
		err = fmt.Errorf("mariadb queues: %w", err)
		return []*dbqSubject{dbqFailing(floor, "rawmyq", "mysql", false, err), dbqFailing(bn, "bmyq", "mysql", true, err),
			dbqFailing(mysqlLeasedName, "leasedmyq", "mysql", false, err)}
	}
	s, err := de.server(ctx, "mysql", "mariadb")
	if err != nil {
		return fail(err)
	}
	dsn := "root@tcp(" + s.addr + ")/baton?timeout=2s&interpolateParams=true&multiStatements=true"
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fail(err)
	}
	_, err = db.ExecContext(ctx, mysqlFloorSchema+"; "+mysqlLeasedSchema)
	db.Close()
	if err != nil {
		return fail(err)
	}
	b, err := mysqllock.OpenURL(ctx, "mysql://root@"+s.addr+"/baton")
	if err != nil {
		return fail(err)
	}
	de.closers = append(de.closers, b.Close)
	open := func(ctx context.Context, queue string) (*mysqlFloor, error) {
		db, c, err := ownConn(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return &mysqlFloor{db: db, c: c, queue: queue}, nil
	}
	raw := &dbqSubject{s: &subject{name: floor, id: "rawmyq", kind: "mysql"},
		open: func(ctx context.Context, queue string) (dbqClient, error) { return open(ctx, queue) }}
	leased := &dbqSubject{s: &subject{name: mysqlLeasedName, id: "leasedmyq", kind: "mysql"},
		open: func(ctx context.Context, queue string) (dbqClient, error) {
			f, err := open(ctx, queue)
			if err != nil {
				return nil, err
			}
			return &mysqlLeased{mysqlFloor: f, owner: fmt.Sprint("floor-", etcdFloorSeq.Add(1))}, nil
		}}
	return []*dbqSubject{raw, dbqBatonSubject(bn, "bmyq", "mysql", b), leased}
}
