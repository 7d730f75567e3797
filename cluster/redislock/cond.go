package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/driver"
)

// condDriver serves one Cond handle. A waiter is a registration (a ticket)
// in a FIFO queue on the server, itself a lease refreshed every RenewEvery;
// Signal removes the oldest registration and publishes to its owner.
type condDriver struct {
	d    *backend
	name string
	keys keySet
}

var _ driver.Cond = (*condDriver)(nil)

type ticket struct {
	id   string
	wake chan int64
}

func (c *condDriver) Prepare(ctx context.Context) (any, error) {
	if err := c.d.n.start(ctx); err != nil {
		return nil, err
	}
	t := &ticket{id: redisnode.NewID(), wake: make(chan int64, 1)}
	c.d.n.register(t.id, t.wake)
	if err := scriptCondPrepare.Run(ctx, c.d.c, c.keys.all(), t.id, c.d.ttlMS(), c.d.wake).Err(); err != nil {
		c.d.n.unregister(t.id)
		return nil, err
	}
	return t, nil
}

func (c *condDriver) Wait(ctx context.Context, tk any) error {
	t, ok := tk.(*ticket)
	if !ok || t == nil {
		return fmt.Errorf("foreign ticket: %w", baton.ErrInvalidArgument)
	}
	defer c.d.n.unregister(t.id)
	for {
		tm := time.NewTimer(c.d.o.RenewEvery)
		select {
		case <-ctx.Done():
			tm.Stop()
			c.withdraw(ctx, t.id)
			return ctx.Err()
		case <-t.wake:
			tm.Stop()
			return nil
		case <-tm.C:
		}
		// Keep the registration alive; a registration that is gone was
		// signalled (its message may have been lost).
		r, err := scriptCondPoll.Run(ctx, c.d.c, c.keys.all(), t.id, c.d.ttlMS()).Int64()
		if err == nil && r == 0 {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			c.d.o.Logger.Warn("redislock: refreshing a cond registration failed", "name", c.name, "err", err)
		}
	}
}

func (c *condDriver) withdraw(ctx context.Context, id string) {
	cctx, done := c.d.cleanupCtx(ctx)
	defer done()
	if err := scriptCondCancel.Run(cctx, c.d.c, c.keys.all(), id, "1").Err(); err != nil {
		c.d.o.Logger.Warn("redislock: withdrawing a cond registration failed; it expires with the TTL",
			"name", c.name, "err", err)
	}
}

func (c *condDriver) Cancel(tk any) {
	t, ok := tk.(*ticket)
	if !ok || t == nil {
		return
	}
	c.d.n.unregister(t.id)
	c.withdraw(context.Background(), t.id)
}

func (c *condDriver) Signal(ctx context.Context) error {
	if err := scriptCondSignal.Run(ctx, c.d.c, c.keys.all(), "1").Err(); err != nil {
		return err
	}
	return nil
}

func (c *condDriver) Broadcast(ctx context.Context) error {
	if err := scriptCondSignal.Run(ctx, c.d.c, c.keys.all(), "0").Err(); err != nil {
		return err
	}
	return nil
}

func (c *condDriver) Close() error { return nil }
