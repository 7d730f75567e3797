//go:build linux

package shmrw

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// The core names the backend, primitive and lock in every error; the
// driver's own errors are bare causes.
func TestErrorsAreBare(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	a, err := Open(ns, "bare")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ns, "bare")
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		_, err := b.TryAcquire(ctx, mode)
		if !errors.Is(err, baton.ErrLocked) || strings.Contains(err.Error(), "bare") || strings.Contains(err.Error(), kind) {
			t.Errorf("TryAcquire(%v) = %v, want a bare ErrLocked", mode, err)
		}
	}
	if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := b.Acquire(ctx, driver.Shared); !errors.Is(err, baton.ErrClosed) || err.Error() != baton.ErrClosed.Error() {
		t.Errorf("Acquire on a closed handle = %v, want bare ErrClosed", err)
	}
}
