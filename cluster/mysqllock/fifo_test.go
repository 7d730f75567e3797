package mysqllock

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// TestNoBarging: a client that unlocks and locks again at once queues
// behind the client already waiting, rather than taking the row back
// before the waiter the release woke can claim it. Without that, 16
// clients on one name see one of them take most of the holds.
func TestNoBarging(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := testName(t)
	db := s.admin(t)
	a, err := openT(t, s.url(testQuery)).Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := openT(t, s.url(testQuery)).Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	const rounds = 20
	for i := range rounds {
		got := make(chan error, 1)
		go func() {
			_, err := b.Lock(ctx)
			got <- err
		}()
		waitUserLock(t, db, 1) // b waits in the server
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// a asks again at once; b must be served first.
		again := make(chan error, 1)
		go func() {
			_, err := a.Lock(ctx)
			again <- err
		}()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case err := <-again:
			t.Fatalf("round %d: the releasing client took the lock back (%v) ahead of the waiting one", i, err)
		}
		select {
		case err := <-again:
			t.Fatalf("round %d: the releasing client's Lock returned (%v) while the waiter held", i, err)
		case <-time.After(20 * time.Millisecond):
		}
		if err := b.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-again; err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitUserLock waits until n sessions wait for a user-level lock.
func waitUserLock(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var got int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock'`).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a user-level lock after 20 s, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
