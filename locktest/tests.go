package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want an error matching %v", what, err, want)
	}
}

func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sameObjects notes the backend's objects (Suite.Objects, when it is set)
// and returns a check that they are still the same: calls that were
// refused must have created nothing.
func (e *env) sameObjects(t *testing.T) (check func()) {
	t.Helper()
	if e.s.Objects == nil {
		return func() {}
	}
	before, err := e.s.Objects(e.cfg)
	ok(t, "objects", err)
	return func() {
		t.Helper()
		after, err := e.s.Objects(e.cfg)
		ok(t, "objects", err)
		if !slices.Equal(before, after) {
			t.Errorf("refused calls created objects: before %q, after %q", before, after)
		}
	}
}

func testBadInput(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	unchanged := e.sameObjects(t)
	badNames := []string{
		"", "a\x00b", strings.Repeat("x", 10240), "../../etc/passwd", "/", "\xff\xfe",
		"a//b", ".", "..", "a/", "/a", "a\nb", "a/../b", "a/./b", "\x7f", "tab\there",
		strings.Repeat("é", baton.MaxNameLen),
	}
	for _, n := range badNames {
		_, err := b.Mutex(ctx, n)
		is(t, fmt.Sprintf("Mutex(%.20q)", n), err, baton.ErrInvalidName)
		_, err = b.RWMutex(ctx, n)
		is(t, fmt.Sprintf("RWMutex(%.20q)", n), err, baton.ErrInvalidName)
		_, err = b.Semaphore(ctx, n, 2)
		is(t, fmt.Sprintf("Semaphore(%.20q)", n), err, baton.ErrInvalidName)
		_, err = b.Cond(ctx, n)
		is(t, fmt.Sprintf("Cond(%.20q)", n), err, baton.ErrInvalidName)
	}
	var nilCtx context.Context
	good := e.name(t)
	_, err := b.Mutex(nilCtx, good)
	is(t, "Mutex(nil ctx)", err, baton.ErrInvalidArgument)
	for _, p := range []int64{0, -1, -1 << 62} {
		_, err = b.Semaphore(ctx, good, p)
		is(t, fmt.Sprintf("Semaphore(permits %d)", p), err, baton.ErrInvalidArgument)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.Mutex(cancelled, good)
	is(t, "Mutex(cancelled ctx)", err, context.Canceled)
	unchanged()

	m, err := b.Mutex(ctx, good)
	ok(t, "Mutex", err)
	_, err = m.Lock(nilCtx)
	is(t, "Lock(nil)", err, baton.ErrInvalidArgument)
	is(t, "Unlock(nil)", m.Unlock(nilCtx), baton.ErrInvalidArgument)
	if e.s.Caps.Semaphore {
		s, err := b.Semaphore(ctx, e.name(t), 3)
		ok(t, "Semaphore", err)
		for _, n := range []int64{0, -2, 4} {
			_, err = s.Acquire(ctx, n)
			is(t, fmt.Sprintf("Acquire(%d)", n), err, baton.ErrInvalidArgument)
			_, err = s.TryAcquire(ctx, n)
			is(t, fmt.Sprintf("TryAcquire(%d)", n), err, baton.ErrInvalidArgument)
		}
		is(t, "Release(0)", s.Release(ctx, 0), baton.ErrInvalidArgument)
		is(t, "Release(1) unheld", s.Release(ctx, 1), baton.ErrNotHeld)
	}
	if e.s.Caps.Cond {
		c, err := b.Cond(ctx, e.name(t))
		ok(t, "Cond", err)
		is(t, "Wait(nil lock)", c.Wait(ctx, nil), baton.ErrInvalidArgument)
		is(t, "Wait(unheld lock)", c.Wait(ctx, m), baton.ErrNotHeld)
	}
}

// result waits up to d for the error of a call made in the background and
// returns it; the test fails with late if the call has not returned by then.
func result(t *testing.T, res <-chan error, d time.Duration, late string) error {
	t.Helper()
	select {
	case err := <-res:
		return err
	case <-time.After(d):
		t.Fatal(late)
	}
	return nil
}
