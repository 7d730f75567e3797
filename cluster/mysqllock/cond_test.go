package mysqllock

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// TestCondSignalDuringPrepare: a Signal may mark a waiter's row after its
// insert and before the handle knows the row (the caller's Unlock comes
// after Prepare, and signallers need not hold the lock), while the
// handle's poller runs for another waiter. The waiter must still wake.
func TestCondSignalDuringPrepare(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, err := newBackend(ctx, db, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	name := testName(t)
	dc, err := d.OpenCond(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c := dc.(*cond)
	defer c.Close()
	other, err := d.OpenCond(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	first, err := c.Prepare(ctx) // keeps the poller running
	if err != nil {
		t.Fatal(err)
	}
	c.inserted = func() {
		if err := other.Broadcast(ctx); err != nil {
			t.Error(err)
		}
		time.Sleep(200 * time.Millisecond) // the poller sees both rows marked
	}
	second, err := c.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.inserted = nil
	for i, tk := range []any{first, second} {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Wait(wctx, tk)
		cancel()
		if err != nil {
			t.Fatalf("waiter %d, registered before the Broadcast: %v", i+1, err)
		}
	}
	// A waiter wakes before its row is deleted.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var left int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+d.t.cond+" WHERE name = ?", c.key).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d registrations left 2 s after both waiters woke", left)
		}
	}
}
