package mysqllock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/closing"
)

// cond is a Cond handle. A waiter is a row of the cond table (its id is the
// ticket), with a lease that the handle renews for all its waiters at once;
// Signal marks the oldest live waiter of the name, Broadcast all of them.
// One goroutine per handle, running only while the handle has waiters,
// wakes the waiters of its marked rows; Signal and Broadcast ring it.
type cond struct {
	b      *backend
	key    string
	handle string // owner of this handle's rows

	mu        sync.Mutex
	waiters   map[uint64]chan struct{} // guarded by mu: registered tickets
	preparing int                      // guarded by mu: registrations not yet in waiters
	polling   bool                     // guarded by mu: the poller runs
	inserted  func()                   // tests: runs between a Prepare's insert and its registration
	closed    bool                     // guarded by mu
	done      chan struct{}            // closed by Close
	stop      context.Context          // ends with Close: cuts the poller's sleep short
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func newCond(b *backend, k string) *cond {
	c := &cond{b: b, key: k, handle: b.owner(), waiters: make(map[uint64]chan struct{}), done: make(chan struct{})}
	c.stop, c.cancel = context.WithCancel(context.Background())
	return c
}

// condTicket is one registration: its row and the channel that its
// waiter blocks on. The channel exists from Prepare on, so a Signal that
// marks the row before Wait is called (the core unlocks in between) is
// not dropped by the poller.
type condTicket struct {
	id uint64
	ch chan struct{}
}

func (c *cond) Prepare(ctx context.Context) (any, error) {
	c.mu.Lock()
	c.preparing++
	c.mu.Unlock()
	var id int64
	err := retrying(ctx, c.b, func(bctx context.Context) error {
		res, err := c.b.db.ExecContext(bctx, `INSERT INTO `+c.b.t.cond+` (name, handle, expires)
			VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`, c.key, c.handle, c.b.ttlMicros())
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		c.mu.Lock()
		c.preparing--
		c.mu.Unlock()
		return nil, err
	}
	if c.inserted != nil {
		c.inserted()
	}
	t := &condTicket{id: uint64(id), ch: make(chan struct{})}
	c.mu.Lock()
	c.preparing--
	if c.closed {
		c.mu.Unlock()
		c.withdraw(t.id)
		return nil, baton.ErrClosed
	}
	c.waiters[t.id] = t.ch
	if !c.polling {
		c.polling = true
		c.wg.Add(1)
		go c.poll()
	}
	c.mu.Unlock()
	return t, nil
}

func (c *cond) Wait(ctx context.Context, ticket any) error {
	t, ok := ticket.(*condTicket)
	if !ok || t == nil {
		return fmt.Errorf("foreign ticket: %w", baton.ErrInvalidArgument)
	}
	select {
	case <-t.ch:
		return nil
	case <-ctx.Done():
	case <-c.done:
	}
	if !c.forget(t) {
		return nil // woken meanwhile
	}
	c.withdraw(t.id)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return baton.ErrClosed
}

// forget takes t out of the handle's waiters and reports whether it was
// still there, that is, not woken.
func (c *cond) forget(t *condTicket) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, waiting := c.waiters[t.id]
	delete(c.waiters, t.id)
	return waiting
}

// withdraw deletes a registration. One that was signalled meanwhile
// (marked, or already taken by the poller for a waiter that then gave up)
// passes the signal on, so that it is not lost.
func (c *cond) withdraw(id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), c.b.c.RequestTimeout)
	defer cancel()
	var n int64
	err := retrying(ctx, c.b, func(ctx context.Context) error {
		res, err := c.b.db.ExecContext(ctx, `DELETE FROM `+c.b.t.cond+` WHERE id = ? AND signalled = 0`, id)
		if err == nil {
			n, _ = res.RowsAffected()
		}
		return err
	})
	if err != nil {
		c.b.c.Logger.Warn("baton: mysql: withdrawing a Cond waiter failed; its lease will end it", "err", err)
		return
	}
	if n == 1 {
		return
	}
	_ = retrying(ctx, c.b, func(ctx context.Context) error {
		_, err := c.b.db.ExecContext(ctx, `DELETE FROM `+c.b.t.cond+` WHERE id = ?`, id)
		return err
	})
	_ = c.Signal(ctx)
}

// Cancel withdraws a registration that was never waited on; a signal it
// received is passed on.
func (c *cond) Cancel(ticket any) {
	if t, ok := ticket.(*condTicket); ok && t != nil {
		c.forget(t)
		c.withdraw(t.id)
	}
}

// poll wakes the handle's waiters whose rows are marked, and renews the
// leases of the others, until none is left. Between the two it sleeps in
// the server (bell.go) while the handle has no marked row, until Signal or
// Broadcast rings the name or the next renewal is due. A renewal later
// than the TTL wakes every waiter of the handle (a spurious wake-up, which
// a Cond allows): a Signal may have skipped their rows meanwhile, or a
// Broadcast swept them, and nobody would wake them.
func (c *cond) poll() {
	defer c.wg.Done()
	renewed := time.Now()
	unmarked := `NOT EXISTS (SELECT 1 FROM ` + c.b.t.cond + ` WHERE handle = ` + binLit(c.handle) + ` AND signalled = 1)`
	for {
		c.mu.Lock()
		if len(c.waiters) == 0 || c.closed {
			c.polling = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.b.c.RequestTimeout)
		_, skipped := c.wakeMarked(ctx)
		if sent := time.Now(); sent.Sub(renewed) >= c.b.c.RenewEvery {
			_, err := c.b.db.ExecContext(ctx, `UPDATE `+c.b.t.cond+` SET expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE handle = ?`,
				c.b.ttlMicros(), c.handle)
			if err == nil {
				if time.Since(renewed) > c.b.c.TTL {
					c.wakeAll()
				}
				renewed = sent
			}
		}
		cancel()
		pause := time.Millisecond // a Prepare under way will know its row soon
		if !skipped {
			due := c.b.c.RenewEvery - time.Since(renewed)
			if c.b.sleepWhile(c.stop, c.b.mark(c.key), unmarked, seconds(due), c.b.c.RenewEvery) == nil {
				continue
			}
			pause = 20 * time.Millisecond // no sleeper connection: by the clock
		}
		select {
		case <-time.After(pause):
		case <-c.done:
		}
	}
}

// wakeAll wakes every waiter of the handle spuriously and withdraws their
// rows, passing on the signals that some of them may have received.
func (c *cond) wakeAll() {
	c.mu.Lock()
	ids := make([]uint64, 0, len(c.waiters))
	for id, ch := range c.waiters {
		delete(c.waiters, id)
		close(ch)
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.withdraw(id)
	}
}

// wakeMarked wakes the handle's waiters whose rows are marked, then
// deletes those rows. Waking comes first: a delete that fails, or that
// the server carried out although the client saw a timeout, must not
// leave a signalled waiter asleep. A marked row with no waiter is kept
// while a Prepare of the handle is under way (a Signal may mark a row
// between its insert and its registration here); otherwise its waiter
// has gone (woken, or withdrawn, which passes the signal on) and the row
// is deleted.
func (c *cond) wakeMarked(ctx context.Context) (found, skipped bool) {
	rows, err := c.b.db.QueryContext(ctx, `SELECT id FROM `+c.b.t.cond+` WHERE handle = ? AND signalled = 1`, c.handle)
	if err != nil {
		return false, false
	}
	var marked []uint64
	for rows.Next() {
		var id uint64
		if rows.Scan(&id) == nil {
			marked = append(marked, id)
		}
	}
	rows.Close()
	if len(marked) == 0 {
		return false, false
	}
	var done []any
	c.mu.Lock()
	for _, id := range marked {
		if ch, ok := c.waiters[id]; ok {
			delete(c.waiters, id)
			close(ch)
		} else if c.preparing > 0 {
			skipped = true
			continue
		}
		done = append(done, id)
	}
	c.mu.Unlock()
	if len(done) > 0 {
		_, _ = c.b.db.ExecContext(ctx, `DELETE FROM `+c.b.t.cond+` WHERE id IN (`+inList(len(done))+`)`, done...)
	}
	return true, skipped
}

// Signal marks the oldest live waiter of the name and rings the name's
// pollers.
func (c *cond) Signal(ctx context.Context) error {
	var n int64
	err := retrying(ctx, c.b, func(bctx context.Context) error {
		res, err := c.b.db.ExecContext(bctx, `UPDATE `+c.b.t.cond+` SET signalled = 1
			WHERE name = ? AND signalled = 0 AND expires > UTC_TIMESTAMP(6) ORDER BY id LIMIT 1`, c.key)
		if err == nil {
			n, _ = res.RowsAffected()
		}
		return err
	})
	if n > 0 {
		c.b.ring(c.b.mark(c.key))
	}
	return err
}

func (c *cond) Broadcast(ctx context.Context) error {
	var n int64
	err := retrying(ctx, c.b, func(bctx context.Context) error {
		res, err := c.b.db.ExecContext(bctx, `UPDATE `+c.b.t.cond+` SET signalled = 1 WHERE name = ? AND signalled = 0`, c.key)
		if err == nil {
			n, _ = res.RowsAffected()
		}
		return err
	})
	if n > 0 {
		c.b.ring(c.b.mark(c.key))
	}
	if err == nil {
		_ = retrying(ctx, c.b, func(bctx context.Context) error {
			_, err := c.b.db.ExecContext(bctx, `DELETE FROM `+c.b.t.cond+` WHERE name = ? AND expires <= UTC_TIMESTAMP(6)`, c.key)
			return err
		})
	}
	return err
}

func (c *cond) Close() error {
	if !closing.First(&c.mu, &c.closed, func() { close(c.done); c.cancel() }) {
		return nil
	}
	c.wg.Wait()
	c.b.untrack(c)
	return nil
}

// retrying runs one statement until it does not lose a deadlock or a lock
// wait (which the server resolves by failing one side), each attempt
// bounded by the request timeout, at most attempts times.
func retrying(ctx context.Context, b *backend, f func(context.Context) error) error {
	const attempts = 8
	var err error
	for i := 0; i < attempts; i++ {
		bctx, cancel := b.bg(ctx)
		err = f(bctx)
		cancel()
		if !retryable(err) {
			return err
		}
		time.Sleep(time.Duration(rand.Int64N(int64(time.Millisecond) << i)))
	}
	return err
}
