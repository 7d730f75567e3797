package pglock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// A Cond waiter is a row of baton_cond, a registration with an expiry that
// the waiter pushes back every renewal period; Signal deletes the oldest
// live registration of the name and notifies "c/<id>", Broadcast all of
// them. A registration found gone was signalled, even if its notification
// was lost. Registrations of dead waiters expire and are skipped.
const (
	// $1 name, $2 TTL in ms.
	condPrepareSQL = `INSERT INTO baton_cond (name, expires)
VALUES ($1, now() + $2::bigint * interval '1 millisecond') RETURNING id`
	condRefreshSQL  = `UPDATE baton_cond SET expires = now() + $2::bigint * interval '1 millisecond' WHERE id = $1`
	condWithdrawSQL = `DELETE FROM baton_cond WHERE id = $1`
	condSignalSQL   = `WITH old AS (DELETE FROM baton_cond WHERE name = $1 AND expires <= now()),
v AS (SELECT id FROM baton_cond WHERE name = $1 AND expires > now() ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED),
d AS (DELETE FROM baton_cond c USING v WHERE c.id = v.id RETURNING c.id)
SELECT count(pg_notify('` + channel + `', 'c/' || id)) FROM d`
)

type condDriver struct {
	b    *backend
	name string
}

func (b *backend) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	if err := b.schema(ctx); err != nil {
		return nil, err
	}
	return &condDriver{b: b, name: name}, nil
}

type ticket struct {
	id      int64
	payload string
	wake    chan struct{}
}

func (c *condDriver) ttlMS() int64 { return int64(c.b.o.TTL / time.Millisecond) }

func (c *condDriver) Prepare(ctx context.Context) (any, error) {
	if err := c.b.lis.ensure(ctx); err != nil {
		return nil, err
	}
	t := &ticket{wake: make(chan struct{}, 1)}
	if err := c.b.pool.QueryRow(ctx, c.b.q(condPrepareSQL), c.name, c.ttlMS()).Scan(&t.id); err != nil {
		return nil, err
	}
	t.payload = "c/" + strconv.FormatInt(t.id, 10)
	if c.b.lis.subscribe(t.payload, t.wake) {
		t.wake <- struct{}{}
	}
	return t, nil
}

func (c *condDriver) Wait(ctx context.Context, tk any) error {
	t, ok := tk.(*ticket)
	if !ok || t == nil {
		return fmt.Errorf("foreign ticket: %w", baton.ErrInvalidArgument)
	}
	defer c.b.lis.unsubscribe(t.payload, t.wake)
	for {
		tm := time.NewTimer(c.b.o.RenewEvery)
		select {
		case <-ctx.Done():
			tm.Stop()
			c.withdraw(t)
			return ctx.Err()
		case <-t.wake:
			tm.Stop()
			return nil
		case <-tm.C:
		}
		rctx, cancel := c.b.rctx()
		tag, err := c.b.pool.Exec(rctx, c.b.q(condRefreshSQL), t.id, c.ttlMS())
		cancel()
		if err == nil && tag.RowsAffected() == 0 {
			return nil // signalled; the notification was lost
		}
		if err != nil {
			c.b.o.Logger.Warn("baton: postgres cond: refreshing a registration failed", "name", c.name, "err", err)
		}
	}
}

// withdraw deletes a registration; when it is already gone, a Signal chose
// it, and the wake-up is passed on to the next waiter.
func (c *condDriver) withdraw(t *ticket) {
	rctx, cancel := c.b.rctx()
	defer cancel()
	tag, err := c.b.pool.Exec(rctx, c.b.q(condWithdrawSQL), t.id)
	if err != nil {
		c.b.o.Logger.Warn("baton: postgres cond: withdrawing a registration failed; it expires with the TTL", "name", c.name, "err", err)
		return
	}
	if tag.RowsAffected() == 0 {
		_ = c.signal(rctx, 1)
	}
}

func (c *condDriver) Cancel(tk any) {
	t, ok := tk.(*ticket)
	if !ok || t == nil {
		return
	}
	c.b.lis.unsubscribe(t.payload, t.wake)
	c.withdraw(t)
}

func (c *condDriver) signal(ctx context.Context, n int64) error {
	var woken int64
	return c.b.pool.QueryRow(ctx, c.b.q(condSignalSQL), c.name, n).Scan(&woken)
}

func (c *condDriver) Signal(ctx context.Context) error { return c.signal(ctx, 1) }

// Broadcast wakes every waiter registered when it runs.
func (c *condDriver) Broadcast(ctx context.Context) error { return c.signal(ctx, 1<<62) }

func (c *condDriver) Close() error { return nil }
