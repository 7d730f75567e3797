package mysqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonlock/baton"
)

// Waits that sleep in the server. MariaDB and MySQL have no NOTIFY, so a
// waiter runs SELECT '<mark>', IF(<state unchanged>, SLEEP(slice), 0) on a
// connection of its own, and whoever changes that state rings the mark
// after its commit: it finds the statements under the mark in the process
// list and interrupts them with KILL QUERY. A statement that started before
// the commit is in the list when the ring looks; one that starts after
// reads the changed state and does not sleep. No wake-up is lost, and a
// waiter costs one statement per slice between changes. Interrupting
// works between sessions of one database user (or with CONNECTION_ADMIN);
// without that right, waiters wake at the end of their slice.

// sleeper is a connection kept for sleeping statements. It never goes back
// to db's pool: a KILL QUERY that comes late must only cut a later sleep
// short (its waiter then reads again), never a statement of anyone else.
type sleeper struct {
	conn *sql.Conn
	id   int64 // CONNECTION_ID()
}

// bell keeps a Backend's idle sleepers and its rings in flight.
type bell struct {
	mu      sync.Mutex
	idle    []*sleeper            // guarded by mu
	busy    map[*sleeper]struct{} // guarded by mu: sleepers in a statement
	closed  bool                  // guarded by mu
	ringing map[string]bool       // guarded by mu: marks being rung; true: ring again
	wg      sync.WaitGroup        // rings in flight
}

// mark is the mark of the sleeping statements that wait on key.
func (b *backend) mark(k string) string { return "baton-wait " + b.userLock(k) }

// getSleeper takes an idle sleeper or makes one; it counts as busy until
// putSleeper, so that Close can interrupt its statement.
func (b *backend) getSleeper(ctx context.Context) (*sleeper, error) {
	b.bell.mu.Lock()
	if b.bell.closed {
		b.bell.mu.Unlock()
		return nil, baton.ErrClosed
	}
	if n := len(b.bell.idle); n > 0 {
		sl := b.bell.idle[n-1]
		b.bell.idle = b.bell.idle[:n-1]
		b.bell.markBusy(sl)
		b.bell.mu.Unlock()
		return sl, nil
	}
	b.bell.mu.Unlock()
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	sl := &sleeper{conn: conn}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&sl.id); err != nil {
		discard(sl)
		return nil, err
	}
	b.bell.mu.Lock()
	defer b.bell.mu.Unlock()
	if b.bell.closed {
		discard(sl)
		return nil, baton.ErrClosed
	}
	b.bell.markBusy(sl)
	return sl, nil
}

// markBusy counts sl as busy; the caller holds mu.
func (bl *bell) markBusy(sl *sleeper) {
	if bl.busy == nil {
		bl.busy = make(map[*sleeper]struct{})
	}
	bl.busy[sl] = struct{}{}
}

// maxIdleSleepers bounds the sleepers kept between waits: a burst of
// waiters must not leave as many connections open for the Backend's life.
const maxIdleSleepers = 8

// putSleeper ends a sleeper's turn: kept for the next wait when reusable
// and there is room, closed otherwise.
func (b *backend) putSleeper(sl *sleeper, reusable bool) {
	b.bell.mu.Lock()
	delete(b.bell.busy, sl)
	if reusable && !b.bell.closed && len(b.bell.idle) < maxIdleSleepers {
		b.bell.idle = append(b.bell.idle, sl)
		sl = nil
	}
	b.bell.mu.Unlock()
	discard(sl)
}

// discard closes a sleeper's connection for good (not back to the pool).
func discard(sl *sleeper) {
	if sl != nil {
		_ = sl.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		_ = sl.conn.Close()
	}
}

// sleepWhile sleeps on a sleeper while the SQL condition cond holds, for
// at most slice (an SQL expression in seconds, at most maxSlice), until a
// ring of mark interrupts it or ctx ends. It returns ctx's error, or the
// statement's.
func (b *backend) sleepWhile(ctx context.Context, mark, cond, slice string, maxSlice time.Duration) error {
	sl, err := b.getSleeper(ctx)
	if err != nil {
		return err
	}
	// Text protocol, so that the process list shows the mark.
	q := "SELECT '" + mark + "', IF(" + cond + ", SLEEP(" + slice + "), 0)"
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxSlice+b.c.RequestTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { b.killQuery(sl.id) })
	var m string
	var r int
	err = sl.conn.QueryRowContext(qctx, q).Scan(&m, &r)
	stop()
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1317 { // interrupted
		err = nil
	}
	b.putSleeper(sl, err == nil)
	if err != nil {
		return err
	}
	return ctx.Err()
}

// seconds is d as an SQL literal in seconds.
func seconds(d time.Duration) string { return fmt.Sprintf("%.6f", max(d, 0).Seconds()) }

// binLit is s as an SQL literal that no escaping can break.
func binLit(s string) string { return "UNHEX('" + hex.EncodeToString([]byte(s)) + "')" }

func (b *backend) killQuery(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), b.c.RequestTimeout)
	defer cancel()
	_, _ = b.db.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(id, 10))
}

// ring wakes the statements sleeping under mark, in the background: the
// caller has committed its change and goes on. Rings of one mark that come
// while one is under way make one more, after it.
func (b *backend) ring(mark string) {
	b.bell.mu.Lock()
	defer b.bell.mu.Unlock()
	if b.bell.closed {
		return
	}
	if _, under := b.bell.ringing[mark]; under {
		b.bell.ringing[mark] = true
		return
	}
	if b.bell.ringing == nil {
		b.bell.ringing = make(map[string]bool)
	}
	b.bell.ringing[mark] = false
	b.bell.wg.Add(1)
	go func() {
		defer b.bell.wg.Done()
		for {
			b.wake(mark)
			b.bell.mu.Lock()
			again := b.bell.ringing[mark]
			if !again {
				delete(b.bell.ringing, mark)
			} else {
				b.bell.ringing[mark] = false
			}
			b.bell.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// wake interrupts the statements sleeping under mark now.
func (b *backend) wake(mark string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.c.RequestTimeout)
	defer cancel()
	// The mark goes in hex: this statement's own text, as the process
	// list shows it, must not match.
	rows, err := b.db.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND = 'Query'`+
		` AND INFO LIKE CONCAT('%', UNHEX(?), '%')`, hex.EncodeToString([]byte(mark)))
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
		_, _ = b.db.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(id, 10))
	}
}

// closeBell waits for the rings under way, interrupts the statements of
// busy sleepers until they are back (a KILL QUERY that comes before its
// statement starts does not stop it, so it is sent again) and closes the
// idle ones. Without it a sleep would outlive the Backend by its slice.
func (b *backend) closeBell() {
	b.bell.mu.Lock()
	b.bell.closed = true
	idle := b.bell.idle
	b.bell.idle = nil
	b.bell.mu.Unlock()
	b.bell.wg.Wait()
	for _, sl := range idle {
		discard(sl)
	}
	deadline := time.Now().Add(b.c.RequestTimeout)
	for {
		b.bell.mu.Lock()
		ids := make([]int64, 0, len(b.bell.busy))
		for sl := range b.bell.busy {
			ids = append(ids, sl.id)
		}
		b.bell.mu.Unlock()
		if len(ids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, id := range ids {
			b.killQuery(id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
