package locktest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Semaphore tests.

func testSemBasics(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	s, err := b.Semaphore(ctx, name, 3)
	ok(t, "Semaphore", err)
	if s.Capacity() != 3 || s.Name() != name {
		t.Errorf("Capacity %d Name %q", s.Capacity(), s.Name())
	}
	_, err = b.Semaphore(ctx, name, 4)
	is(t, "Semaphore with another capacity", err, baton.ErrMismatch)
	// Every backend names the existing capacity, in one text.
	var me *baton.MismatchError
	if !errors.As(err, &me) || me.Have != 3 || me.Want != 4 || !strings.HasSuffix(err.Error(), "semaphore "+strconv.Quote(name)+": open: exists with capacity 3, not 4") {
		t.Errorf("Semaphore with another capacity: %v; want a MismatchError naming the existing capacity 3", err)
	}
	s2, err := b.Semaphore(ctx, name, 3)
	ok(t, "Semaphore", err)
	_, err = s.Acquire(ctx, 2)
	ok(t, "Acquire 2", err)
	_, err = s2.TryAcquire(ctx, 2)
	is(t, "TryAcquire 2 of 1 left", err, baton.ErrLocked)
	_, err = s2.TryAcquire(ctx, 1)
	ok(t, "TryAcquire 1", err)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s2.Acquire(tctx, 1)
	cancel()
	is(t, "Acquire on a full semaphore", err, context.DeadlineExceeded)
	is(t, "Release more than held", s2.Release(ctx, 2), baton.ErrNotHeld)
	ok(t, "Release 1", s2.Release(ctx, 1))
	ok(t, "Release 1 of 2", s.Release(ctx, 1))
	_, err = s2.TryAcquire(ctx, 2)
	ok(t, "TryAcquire 2 after releases", err)
	ok(t, "Release", s2.Release(ctx, 2))
	ok(t, "Release", s.Release(ctx, 1))
	is(t, "Release unheld", s.Release(ctx, 1), baton.ErrNotHeld)
	// A waiter is served when permits come back.
	_, err = s.Acquire(ctx, 3)
	ok(t, "Acquire 3", err)
	done := make(chan error, 1)
	go func() { _, err := s2.Acquire(ctx, 2); done <- err }()
	time.Sleep(20 * time.Millisecond)
	ok(t, "Release 3", s.Release(ctx, 3))
	err = result(t, done, 5*time.Second, "waiter not served after Release")
	ok(t, "waiter", err)
	ok(t, "Release", s2.Release(ctx, 2))
}
