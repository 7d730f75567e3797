package mysqllock

import (
	"context"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/closing"
)

// cond is a Cond handle. A waiter is a row of the cond table (its id is the
// ticket), with a lease that the handle renews for all its waiters at once;
// Signal marks the oldest live waiter of the name, Broadcast all of them.
// One goroutine per handle, running only while the handle has waiters,
// looks for its marked rows with backoff and wakes their waiters.
type cond struct {
	b      *backend
	key    string
	handle string // owner of this handle's rows

	mu      sync.Mutex
	waiters map[uint64]chan struct{} // guarded by mu: tickets in Wait
	polling bool                     // guarded by mu: the poller runs
	closed  bool                     // guarded by mu
	kick    chan struct{}            // wakes the poller early
	done    chan struct{}            // closed by Close
	wg      sync.WaitGroup
}

func newCond(b *backend, k string) *cond {
	return &cond{b: b, key: k, handle: b.owner(), waiters: make(map[uint64]chan struct{}),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
}

func (c *cond) Prepare(ctx context.Context) (any, error) {
	bctx, cancel := c.b.bg(ctx)
	defer cancel()
	res, err := c.b.db.ExecContext(bctx, `INSERT INTO `+c.b.t.cond+` (name, handle, expires)
		VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`, c.key, c.handle, c.b.ttlMicros())
	if err != nil {
		return nil, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return nil, err
	}
	return uint64(id), nil
}

func (c *cond) Wait(ctx context.Context, ticket any) error {
	id := ticket.(uint64)
	ch := make(chan struct{})
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.Cancel(ticket)
		return baton.ErrClosed
	}
	c.waiters[id] = ch
	if !c.polling {
		c.polling = true
		c.wg.Add(1)
		go c.poll()
	}
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	case <-c.done:
	}
	c.mu.Lock()
	_, waiting := c.waiters[id]
	delete(c.waiters, id)
	c.mu.Unlock()
	if !waiting {
		return nil // woken meanwhile
	}
	c.withdraw(id)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return baton.ErrClosed
}

// withdraw deletes a registration. One that was signalled meanwhile
// (marked, or already taken by the poller for a waiter that then gave up)
// passes the signal on, so that it is not lost.
func (c *cond) withdraw(id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), c.b.c.RequestTimeout)
	defer cancel()
	res, err := c.b.db.ExecContext(ctx, `DELETE FROM `+c.b.t.cond+` WHERE id = ? AND signalled = 0`, id)
	if err != nil {
		c.b.c.Logger.Warn("baton: mysql: withdrawing a Cond waiter failed; its lease will end it", "err", err)
		return
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return
	}
	_, _ = c.b.db.ExecContext(ctx, `DELETE FROM `+c.b.t.cond+` WHERE id = ?`, id)
	_ = c.Signal(ctx)
}

func (c *cond) Cancel(ticket any) { c.withdraw(ticket.(uint64)) }

// poll wakes the handle's waiters whose rows are marked, and renews the
// leases of the others, until none is left.
func (c *cond) poll() {
	defer c.wg.Done()
	backoff := time.Millisecond
	renewed := time.Now()
	for {
		c.mu.Lock()
		if len(c.waiters) == 0 || c.closed {
			c.polling = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.b.c.RequestTimeout)
		woke := c.wakeMarked(ctx)
		if time.Since(renewed) >= c.b.c.RenewEvery {
			renewed = time.Now()
			_, _ = c.b.db.ExecContext(ctx, `UPDATE `+c.b.t.cond+` SET expires = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE handle = ?`,
				c.b.ttlMicros(), c.handle)
		}
		cancel()
		if woke {
			backoff = time.Millisecond
		} else {
			backoff = min(2*backoff, 20*time.Millisecond)
		}
		select {
		case <-time.After(backoff):
		case <-c.kick:
			backoff = time.Millisecond
		case <-c.done:
		}
	}
}

// wakeMarked deletes the handle's marked rows and wakes their waiters.
func (c *cond) wakeMarked(ctx context.Context) bool {
	rows, err := c.b.db.QueryContext(ctx, `SELECT id FROM `+c.b.t.cond+` WHERE handle = ? AND signalled = 1`, c.handle)
	if err != nil {
		return false
	}
	var ids []any
	for rows.Next() {
		var id uint64
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	if len(ids) == 0 {
		return false
	}
	if _, err := c.b.db.ExecContext(ctx, `DELETE FROM `+c.b.t.cond+` WHERE id IN (`+inList(len(ids))+`)`, ids...); err != nil {
		return false
	}
	c.mu.Lock()
	for _, id := range ids {
		if ch, ok := c.waiters[id.(uint64)]; ok {
			delete(c.waiters, id.(uint64))
			close(ch)
		}
	}
	c.mu.Unlock()
	return true
}

// Signal marks the oldest live waiter of the name.
func (c *cond) Signal(ctx context.Context) error {
	bctx, cancel := c.b.bg(ctx)
	defer cancel()
	_, err := c.b.db.ExecContext(bctx, `UPDATE `+c.b.t.cond+` SET signalled = 1
		WHERE name = ? AND signalled = 0 AND expires > UTC_TIMESTAMP(6) ORDER BY id LIMIT 1`, c.key)
	c.kickSelf()
	return err
}

func (c *cond) Broadcast(ctx context.Context) error {
	bctx, cancel := c.b.bg(ctx)
	defer cancel()
	_, err := c.b.db.ExecContext(bctx, `UPDATE `+c.b.t.cond+` SET signalled = 1 WHERE name = ? AND signalled = 0`, c.key)
	if err == nil {
		_, _ = c.b.db.ExecContext(bctx, `DELETE FROM `+c.b.t.cond+` WHERE name = ? AND expires <= UTC_TIMESTAMP(6)`, c.key)
	}
	c.kickSelf()
	return err
}

// kickSelf has this handle's poller look at once: the signalled waiter is
// often of the same handle.
func (c *cond) kickSelf() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *cond) Close() error {
	if !closing.First(&c.mu, &c.closed, func() { close(c.done) }) {
		return nil
	}
	c.wg.Wait()
	c.b.untrack(c)
	return nil
}
