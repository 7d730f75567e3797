package locktest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Cond tests.

func testCondBasics(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	c, err := b.Cond(ctx, name)
	ok(t, "Cond", err)

	// Signal wakes a waiter; the waiter returns holding the lock.
	var ready atomic.Bool
	done := make(chan error, 1)
	go func() {
		if _, err := m.Lock(ctx); err != nil {
			done <- err
			return
		}
		for !ready.Load() {
			if err := c.Wait(ctx, m); err != nil {
				done <- err
				return
			}
		}
		done <- m.Unlock(ctx)
	}()
	time.Sleep(30 * time.Millisecond)
	_, err = m.Lock(ctx)
	ok(t, "Lock", err)
	ready.Store(true)
	ok(t, "Signal", c.Signal(ctx))
	ok(t, "Unlock", m.Unlock(ctx))
	err = result(t, done, 5*time.Second, "Signal did not wake the waiter")
	ok(t, "waiter", err)

	// Broadcast wakes every waiter.
	const n = 3
	var woken atomic.Int32
	var gen atomic.Int32
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			if _, err := m.Lock(ctx); err != nil {
				errs <- err
				return
			}
			for gen.Load() == 0 {
				if err := c.Wait(ctx, m); err != nil {
					errs <- err
					return
				}
			}
			woken.Add(1)
			errs <- m.Unlock(ctx)
		}()
	}
	time.Sleep(50 * time.Millisecond)
	_, err = m.Lock(ctx)
	ok(t, "Lock", err)
	gen.Store(1)
	ok(t, "Broadcast", c.Broadcast(ctx))
	ok(t, "Unlock", m.Unlock(ctx))
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			ok(t, "broadcast waiter", err)
		case <-time.After(5 * time.Second):
			t.Fatalf("Broadcast woke %d of %d", woken.Load(), n)
		}
	}

	// A cancelled Wait returns the context's error, holding the lock.
	_, err = m.Lock(ctx)
	ok(t, "Lock", err)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = c.Wait(tctx, m)
	cancel()
	is(t, "cancelled Wait", err, context.DeadlineExceeded)
	_, err = m.TryLock(ctx)
	is(t, "TryLock after a cancelled Wait (the waiter holds)", err, baton.ErrLocked)
	ok(t, "Unlock after a cancelled Wait", m.Unlock(ctx))
}
