package mysqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batonlock/baton/driver"
)

// Requests of several statements. With the connections' multi-statement
// option and client-side interpolation of arguments (OpenURL sets both
// unless the URL says otherwise), a Put without uniqueness keys is one
// round trip instead of four (START TRANSACTION, the counter, the INSERT,
// COMMIT), a Claim of one job one (queue_one.go) and of several two
// instead of five: the transaction's statements go together, on a
// connection of the pool taken for the call, and the values one statement
// hands the next stay on the server (LAST_INSERT_ID, user variables). A queue finds out at open whether its Backend's
// connections run such requests (probeMulti) and sends the statements one
// by one otherwise (a *sql.DB given to New without those options).
//
// A request stops at its first failing statement, which may leave its
// transaction open on the connection: the connection is then rolled back
// before it goes back to the pool, or dropped (abandon).

// probeMulti reports whether db's connections run a request of several
// statements with arguments.
func probeMulti(ctx context.Context, db *sql.DB) bool {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	var one int
	return multi(ctx, conn, "DO ?; SELECT ?", []any{0, 1}, func(r *sql.Rows) error { return r.Scan(&one) }) == nil && one == 1
}

// multi sends query, several statements, on conn, and hands each row of
// the result sets that have columns to scan.
func multi(ctx context.Context, conn *sql.Conn, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for {
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		if !rows.NextResultSet() {
			break
		}
	}
	return rows.Err()
}

// abandon ends whatever transaction a failed request left open on conn,
// or has the pool drop the connection if that fails too.
func abandon(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	}
}

// noKeys reports whether no job has a uniqueness key (a Put with keys
// reads the pending keys between its statements).
func noKeys(jobs []driver.PutJob) bool {
	for _, j := range jobs {
		if j.Key != "" {
			return false
		}
	}
	return true
}

// putMulti is putOnce in one request, for jobs without keys.
func (d *queueDriver) putMulti(ctx context.Context, jobs []driver.PutJob) ([]uint64, bool, error) {
	n := len(jobs)
	draw, args := drawSQL(d.b.t.lock, d.name, n, d.count)
	var q strings.Builder
	q.WriteString("START TRANSACTION; " + draw + "; SELECT LAST_INSERT_ID(), ROW_COUNT(); INSERT INTO " + d.job +
		" (queue, id, ready_at, max_attempts, ukey, ukey_live, payload) VALUES ")
	for i, j := range jobs {
		if i > 0 {
			q.WriteString(", ")
		}
		at := "UTC_TIMESTAMP(6)"
		args = append(args, d.name, n-1-i) // job i's id: the new counter less n-1-i
		if !j.At.IsZero() {
			at = "GREATEST(UTC_TIMESTAMP(6), ?)"
			args = append(args, j.At.UTC())
		}
		q.WriteString("(?, LAST_INSERT_ID() - ?, " + at + ", ?, NULL, NULL, ?)")
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		args = append(args, j.MaxAttempts, payload)
	}
	q.WriteString("; COMMIT")
	conn, err := d.b.db.Conn(ctx)
	if err != nil {
		return nil, false, err
	}
	defer conn.Close()
	var next, affected sql.NullInt64
	err = multi(ctx, conn, q.String(), args, func(r *sql.Rows) error { return r.Scan(&next, &affected) })
	if err == nil && (!next.Valid || !affected.Valid) {
		err = errors.New("put: no answer from the request")
	}
	if err != nil {
		abandon(conn)
		return nil, false, err
	}
	last, sleepers := drawResult(next.Int64, affected.Int64, n, d.count)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = last + 1 + uint64(i)
	}
	return ids, sleepers, nil
}

// tryClaimMulti is tryClaim in two requests: the pick with the start of
// the transaction, and the claim with the commit, whose answer is read
// before the commit (as in queue_one.go).
func (d *queueDriver) tryClaimMulti(ctx context.Context, n int) (cl taken, due time.Duration, err error) {
	conn, err := d.b.db.Conn(ctx)
	if err != nil {
		return taken{}, 0, err
	}
	defer conn.Close()
	open := true // a transaction may be open on conn
	defer func() {
		if open {
			abandon(conn)
		}
	}()
	var got, dead []pick
	err = multi(ctx, conn, d.guard+"START TRANSACTION; "+d.pickSQL(), []any{d.name, n}, func(r *sql.Rows) error {
		var err error
		got, dead, err = scanPick(r, got, dead)
		return err
	})
	if err != nil {
		return taken{}, 0, err
	}
	if len(dead) > 0 || len(got) == 0 {
		due, done, err := d.noneOrDead(ctx, conn, got, dead)
		if done || err != nil {
			if err == nil {
				_, err = conn.ExecContext(ctx, "COMMIT")
				open = err != nil
			}
			return taken{}, due, err
		}
	}
	owner := d.b.owner()
	sent := time.Now()
	// The tokens come from the counter's LAST_INSERT_ID(), which a missing
	// counter row would leave at an older statement's value: the claim's
	// UPDATE matches nothing then.
	set, args := d.claimSQL(got, owner, "(LAST_INSERT_ID() - ?)")
	var last, counted, claimed sql.NullInt64
	err = multi(ctx, conn, "UPDATE "+d.b.t.lock+" SET token = LAST_INSERT_ID(token + ?) WHERE name = ?; SET @baton_rows = ROW_COUNT(); "+
		set+" AND @baton_rows = 1; SELECT LAST_INSERT_ID(), @baton_rows, ROW_COUNT(); COMMIT",
		append([]any{len(got), d.toks, len(got)}, args...), func(r *sql.Rows) error { return r.Scan(&last, &counted, &claimed) })
	switch {
	case err != nil:
	case !last.Valid || !counted.Valid || !claimed.Valid:
		err = errors.New("claim: no answer from the request")
	case counted.Int64 != 1:
		err = fmt.Errorf("claim: the queue's token row %q is missing", d.toks)
	case claimed.Int64 != int64(len(got)):
		err = fmt.Errorf("claim: %d of the %d jobs picked were claimed", claimed.Int64, len(got))
	}
	if err != nil {
		abandon(conn)
		open = false
		d.giveBackOwner(owner) // the commit may have run
		return taken{}, 0, err
	}
	open = false
	return taken{got: got, owner: owner, last: uint64(last.Int64), sent: sent}, 0, nil
}
