package mysqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Sleeping claimants and their wake-ups (see queue.go).

// getSleeper returns a connection to sleep on. Sleepers' connections
// never go back to db's pool: a KILL QUERY sent to a sleeper that woke
// meanwhile must not interrupt a statement of anyone else, only a later
// sleep (which then reads again).
func (d *queueDriver) getSleeper(ctx context.Context) (*sql.Conn, error) {
	d.mu.Lock()
	if n := len(d.sleepers); n > 0 {
		sl := d.sleepers[n-1]
		d.sleepers = d.sleepers[:n-1]
		d.mu.Unlock()
		return sl, nil
	}
	d.mu.Unlock()
	return d.b.db.Conn(ctx)
}

func (d *queueDriver) putSleeper(sl *sql.Conn) {
	if sl == nil {
		return
	}
	d.mu.Lock()
	if !d.closed {
		d.sleepers = append(d.sleepers, sl)
		sl = nil
	}
	d.mu.Unlock()
	discard(sl)
}

// discard closes a connection for good (not back to the pool).
func discard(sl *sql.Conn) {
	if sl != nil {
		_ = sl.Raw(func(any) error { return sqldriver.ErrBadConn })
		_ = sl.Close()
	}
}

// sleep waits on sl until the generation moves from gen, a KILL QUERY
// interrupts it, or the slice ends: next (when the next delayed job or
// lease is due), at most the TTL.
func (d *queueDriver) sleep(ctx context.Context, sl *sql.Conn, gen uint64, next time.Duration) error {
	slice := d.b.c.TTL
	if next > 0 && next < slice {
		slice = max(next, time.Millisecond)
	}
	// Text protocol, so that the process list shows the mark.
	q := fmt.Sprintf("SELECT '%s', IF(token = %d, SLEEP(%.6f), 0) FROM %s WHERE name = UNHEX('%s')",
		d.mark, gen, slice.Seconds(), d.b.t.lock, hex.EncodeToString([]byte(d.ids)))
	var m string
	var r int
	err := sl.QueryRowContext(ctx, q).Scan(&m, &r)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1317 { // interrupted: woken
		return nil
	}
	return err
}

// wakeSleepers interrupts the sleeping claimants of the queue, after a
// commit that moved the generation and found claimants counted as
// sleeping (drawIDs): one counted later read the moved generation, and
// sleeps not; one counted sooner sleeps in a statement that this finds.
func (d *queueDriver) wakeSleepers() {
	ctx, cancel := context.WithTimeout(context.Background(), d.b.c.RequestTimeout)
	defer cancel()
	// The mark goes in hex: this statement's own text, as the process
	// list shows it, must not match (a late KILL QUERY would then
	// interrupt whatever its connection runs next).
	rows, err := d.b.db.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND = 'Query'`+
		` AND INFO LIKE CONCAT('%', UNHEX(?), '%')`, hex.EncodeToString([]byte(d.mark)))
	if err != nil {
		return
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		_, _ = d.b.db.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(id, 10))
	}
}

// countSleeper adds delta to the count of the queue's claimants that may
// sleep, which spares a Put the read of the process list when it is 0. A
// claimant that dies counted leaves it above 0: Puts then read the list,
// as they would with sleepers.
func (d *queueDriver) countSleeper(delta int) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.b.c.RequestTimeout)
	defer cancel()
	_, err := d.b.db.ExecContext(ctx, `UPDATE `+d.b.t.lock+` SET token = IF(CAST(token AS SIGNED) + ? < 0, 0, CAST(token AS SIGNED) + ?) WHERE name = ?`, delta, delta, d.count)
	return err
}

// ring moves the generation and wakes the sleepers, after a change that
// made a job ready other than a Put.
func (d *queueDriver) ring() {
	ctx, cancel := context.WithTimeout(context.Background(), d.b.c.RequestTimeout)
	defer cancel()
	if _, sleepers, err := drawIDs(ctx, d.b.db, d.b.t.lock, d.name, 1, d.count); err == nil && sleepers {
		d.wakeSleepers()
	}
}
