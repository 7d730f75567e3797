package baton

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/batonlock/baton/driver"
)

// condHandle is the core of a Cond handle.
type condHandle struct {
	b    *coreBackend
	name string
	d    driver.Cond

	closed atomic.Bool
}

// counted is implemented by the core's lock handles, so that Wait can refuse
// a lock held reentrantly (unlocking once would not release it) or not held.
type counted interface {
	holdCount(ctx context.Context) int
}

func (c *condHandle) errf(format string, args ...any) error {
	return fmt.Errorf("baton: cond %q: "+format, append([]any{c.name}, args...)...)
}

func (c *condHandle) isClosed() bool { return c.closed.Load() }

// Wait releases l, waits for a Signal or Broadcast, and locks l again before
// it returns, also when ctx ends first.
func (c *condHandle) Wait(ctx context.Context, l Locker) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if l == nil {
		return c.errf("%w: nil lock", ErrInvalidArgument)
	}
	if c.isClosed() {
		return c.errf("%w", ErrClosed)
	}
	if cl, ok := l.(counted); ok {
		switch n := cl.holdCount(ctx); {
		case n == 0:
			return c.errf("wait: %w", ErrNotHeld)
		case n > 1:
			return c.errf("%w: wait with a lock held %d times", ErrInvalidArgument, n)
		}
	}
	// Register before unlocking: a Signal sent after Unlock must find us.
	ticket, err := c.d.Prepare(ctx)
	if err != nil {
		return c.errf("wait: %w", err)
	}
	if err := l.Unlock(ctx); err != nil {
		c.d.Cancel(ticket)
		return c.errf("wait: %w", err)
	}
	werr := c.d.Wait(ctx, ticket)
	// Lock again whatever happened, as sync.Cond does; the caller's
	// context may be done, so do not let it cut the re-lock short.
	_, lerr := l.Lock(context.WithoutCancel(ctx))
	switch {
	case werr == nil && lerr == nil:
		return nil
	case lerr == nil:
		return c.errf("wait: %w", werr)
	case werr == nil:
		return c.errf("wait: relock: %w", lerr)
	default:
		return c.errf("wait: %w", errors.Join(werr, lerr))
	}
}

func (c *condHandle) Signal(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if c.isClosed() {
		return c.errf("%w", ErrClosed)
	}
	if err := c.d.Signal(ctx); err != nil {
		return c.errf("signal: %w", err)
	}
	return nil
}

func (c *condHandle) Broadcast(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if c.isClosed() {
		return c.errf("%w", ErrClosed)
	}
	if err := c.d.Broadcast(ctx); err != nil {
		return c.errf("broadcast: %w", err)
	}
	return nil
}

func (c *condHandle) Name() string { return c.name }

func (c *condHandle) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := c.d.Close()
	c.b.forget(c)
	if err != nil {
		return c.errf("close: %w", err)
	}
	return nil
}

var _ Cond = (*condHandle)(nil)
