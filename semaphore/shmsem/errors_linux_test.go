//go:build linux

package shmsem

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/batonlock/baton"
)

// The core names the backend, primitive and semaphore in every error; the
// driver's own errors are bare causes.
func TestErrorsAreBare(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	a, err := Open(ns, "bare", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g, err := a.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.TryAcquire(ctx, 1)
	if !errors.Is(err, baton.ErrLocked) || strings.Contains(err.Error(), "bare") || strings.Contains(err.Error(), kind) {
		t.Errorf("TryAcquire = %v, want a bare ErrLocked", err)
	}
	if err := a.Release(ctx, g, 3); !errors.Is(err, baton.ErrNotHeld) || strings.Contains(err.Error(), kind) {
		t.Errorf("Release of more than the grant = %v, want a bare ErrNotHeld", err)
	}
	if _, err := Open(ns, "bare", 3); !errors.Is(err, baton.ErrMismatch) || strings.Contains(err.Error(), "bare") {
		t.Errorf("Open with another capacity = %v, want a bare ErrMismatch", err)
	}
	if err := a.Release(ctx, g, 2); err != nil {
		t.Fatal(err)
	}
}
