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

// fail wraps the cause of a failed op in the handle's *Error.
func (c *condHandle) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	return c.b.failed(op, KindCond, c.name, err)
}

// Wait releases l, waits for a Signal or Broadcast, and locks l again before
// it returns, also when ctx ends first. A failure of l's Unlock or Lock is
// l's error, as l returned it.
func (c *condHandle) Wait(ctx context.Context, l Locker) error {
	o := c.b.observer()
	if o == nil {
		return c.waitErr(c.wait(ctx, l))
	}
	c.b.emit(o, Event{Type: EventAcquire, Kind: KindCond, Name: c.name, Op: "wait"})
	t0 := monoNow()
	err := c.waitErr(c.wait(ctx, l))
	e := Event{Type: EventAcquired, Kind: KindCond, Name: c.name, Op: "wait", Wait: since(t0)}
	if err != nil {
		e.Type, e.Err = EventFailed, err
	}
	c.b.emit(o, e)
	return err
}

// waitErr is the error of Wait from those of the wait and of l.
func (c *condHandle) waitErr(werr, lerr error) error {
	switch {
	case lerr == nil:
		return c.fail("wait", werr)
	case werr == nil:
		return lerr
	default:
		return errors.Join(c.fail("wait", werr), lerr)
	}
}

// wait returns the cause of the wait's failure and the error of l.
func (c *condHandle) wait(ctx context.Context, l Locker) (werr, lerr error) {
	if ctx == nil {
		return errNilContext, nil
	}
	if l == nil {
		return fmt.Errorf("%w: nil lock", ErrInvalidArgument), nil
	}
	if c.closed.Load() {
		return ErrClosed, nil
	}
	if cl, ok := l.(counted); ok {
		switch n := cl.holdCount(ctx); {
		case n == 0:
			return fmt.Errorf("%w: the lock is not held", ErrNotHeld), nil
		case n > 1:
			return fmt.Errorf("%w: wait with a lock held %d times", ErrInvalidArgument, n), nil
		}
	}
	// Register before unlocking: a Signal sent after Unlock must find us.
	ticket, err := c.d.Prepare(ctx)
	if err != nil {
		return err, nil
	}
	if err := l.Unlock(ctx); err != nil {
		c.d.Cancel(ticket)
		return nil, err
	}
	werr = c.d.Wait(ctx, ticket)
	// Lock again whatever happened, as sync.Cond does; the caller's
	// context may be done, so do not let it cut the re-lock short.
	_, lerr = l.Lock(context.WithoutCancel(ctx))
	return werr, lerr
}

func (c *condHandle) Signal(ctx context.Context) error {
	return c.fail("signal", c.call(ctx, c.d.Signal))
}

func (c *condHandle) Broadcast(ctx context.Context) error {
	return c.fail("broadcast", c.call(ctx, c.d.Broadcast))
}

func (c *condHandle) call(ctx context.Context, f func(context.Context) error) error {
	if ctx == nil {
		return errNilContext
	}
	if c.closed.Load() {
		return ErrClosed
	}
	return f(ctx)
}

func (c *condHandle) Name() string { return c.name }
func (c *condHandle) Close() error { return c.fail("close", c.close()) }

func (c *condHandle) close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := c.d.Close()
	c.b.forget(c)
	return err
}

var _ Cond = (*condHandle)(nil)
