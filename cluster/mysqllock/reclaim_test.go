package mysqllock

import (
	"context"
	"database/sql"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// reclaimBackend returns a backend with the test TTL, its baton.Backend and
// its database.
func reclaimBackend(t *testing.T) (*backend, baton.Backend, *sql.DB) {
	t.Helper()
	s := sharedServer(t)
	createDB(t, s, "baton")
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d, err := newBackend(context.Background(), db, []lease.Option{lease.WithTTL(testTTL)}, false)
	if err != nil {
		t.Fatal(err)
	}
	b := baton.NewBackend(d)
	t.Cleanup(func() { b.Close() })
	return d, b, db
}

func rowCount(t *testing.T, db *sql.DB, k string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM baton_lock WHERE name = ?", k).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSweptRowOpenHandle: a sweep deletes the rows of free Mutex and
// RWMutex names while their handles stay open; the next TryLock of those
// handles makes the row again, succeeds and draws a token above the ones
// before. Held names, and a Semaphore's row, stay.
func TestSweptRowOpenHandle(t *testing.T) {
	d, b, db := reclaimBackend(t)
	ctx := context.Background()
	name := testName(t)
	m, err := b.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rw, err := b.RWMutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	held, err := b.Mutex(ctx, name+"-held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	sem, err := b.Semaphore(ctx, name, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sem.Close()
	var hiM, hiR baton.Token
	for i := 0; i < 3; i++ {
		h, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hiM = h.Token()
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		h, err = rw.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hiR = h.Token()
		if err := rw.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sem.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.sweep(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]int{key('m', name): 0, key('r', name): 0, key('m', name+"-held"): 1, key('s', name): 1} {
		if n := rowCount(t, db, k); n != want {
			t.Errorf("%s: %d rows after the sweep, want %d", k, n, want)
		}
	}
	h, err := m.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock of a swept name with its handle open: %v", err)
	}
	if h.Token() <= hiM {
		t.Errorf("Mutex token %d after the sweep, not above %d", h.Token(), hiM)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h, err = rw.TryLock(ctx)
	if err != nil {
		t.Fatalf("RWMutex TryLock of a swept name: %v", err)
	}
	if h.Token() <= hiR {
		t.Errorf("RWMutex token %d after the sweep, not above %d", h.Token(), hiR)
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRemovedSemaphoreTokens: a Semaphore removed (its row deleted, so that
// it can be made again with another capacity) and made again draws tokens
// above the ones before.
func TestRemovedSemaphoreTokens(t *testing.T) {
	_, b, _ := reclaimBackend(t)
	ctx := context.Background()
	name := testName(t)
	var hi baton.Token
	for _, permits := range []int64{2, 3} {
		s, err := b.Semaphore(ctx, name, permits)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			h, err := s.Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if h.Token() <= hi {
				t.Fatalf("capacity %d: token %d, not above %d", permits, h.Token(), hi)
			}
			hi = h.Token()
			if err := s.Release(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		if err := b.(baton.Inspector).Remove(ctx, baton.KindSemaphore, name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSweepDeadRows: the hold row and the Cond registration of clients
// that died (their leases ended) are swept, and then the RWMutex row they
// kept.
func TestSweepDeadRows(t *testing.T) {
	d, _, db := reclaimBackend(t)
	ctx := context.Background()
	name := testName(t)
	k := key('r', name)
	if _, err := d.ensureRow(ctx, k, 0); err != nil {
		t.Fatal(err)
	}
	past := "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"
	if _, err := db.Exec("INSERT INTO baton_hold (name, owner, mode, n, token, expires) VALUES (?, 'dead', 0, 1, 1, "+past+")", k); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO baton_cond (name, handle, expires) VALUES (?, 'dead', "+past+")", key('c', name)); err != nil {
		t.Fatal(err)
	}
	if err := d.sweep(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM baton_hold WHERE name = ?) + (SELECT COUNT(*) FROM baton_cond WHERE name = ?)",
		k, key('c', name)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 || rowCount(t, db, k) != 0 {
		t.Errorf("%d hold and cond rows, %d lock rows left after the sweep, want none", n, rowCount(t, db, k))
	}
}
