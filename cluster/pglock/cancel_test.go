package pglock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// lockRows counts the granted and the waiting advisory locks of a name.
func lockRows(t *testing.T, kind baton.Kind, name string) (granted, waiting int) {
	t.Helper()
	ctx, c := adminConn(t)
	err := c.QueryRow(ctx, `SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
		FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1
		AND classid::bigint = ($1::bigint >> 32) & 4294967295 AND objid::bigint = $1::bigint & 4294967295`, advisoryKey(kind, name)).Scan(&granted, &waiting)
	if err != nil {
		t.Fatal(err)
	}
	return granted, waiting
}

// TestCancelKeepsOtherHolds: pgx closes a connection whose statement's
// context ends, which drops every lock of its session; so no hold may share
// a connection with a wait that can be cancelled. A cancelled wait leaves
// nothing of itself on the server, and a hold of another handle of the same
// Backend, taken before, stays.
func TestCancelKeepsOtherHolds(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	b := openT(t, url)
	other := openT(t, url)
	x, y := mutexT(t, b, "cancel-x"), mutexT(t, b, "cancel-y")
	oy := mutexT(t, other, "cancel-y")
	ox := mutexT(t, other, "cancel-x")
	hx, err := x.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oy.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		_, err := y.Lock(cctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of a held name with a deadline: %v", err)
		}
	}
	// The cancelled sessions give their requests back once the server
	// answers the cancel requests: soon, but a loaded machine takes its time.
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, w := lockRows(t, baton.KindMutex, "cancel-y")
		if g == 1 && w == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cancelled waits left %d granted, %d waiting locks (want the other client's only)", g, w)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g, _ := lockRows(t, baton.KindMutex, "cancel-x"); g != 1 || hx.Err() != nil {
		t.Fatalf("the hold of another handle: %d granted on the server, Err %v", g, hx.Err())
	}
	if _, err := ox.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock of a name held by another handle of the cancelled one's Backend: %v", err)
	}
	// An Unlock given a context that is already done still unlocks.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := x.Unlock(done); err != nil {
		t.Fatalf("Unlock with a done context: %v", err)
	}
	if _, err := ox.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the Unlock: %v", err)
	}
	if err := ox.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := oy.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
