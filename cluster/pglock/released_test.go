package pglock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// lockQuickly locks m and reports how long that took; a Lock that waits
// out a lease takes most of faultTTL.
func lockQuickly(t *testing.T, m baton.Mutex) {
	t.Helper()
	start := time.Now()
	if _, err := m.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > faultTTL/2 {
		t.Errorf("Lock after a release waited %v: the release was taken for a holder that died", d)
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// leaseRuns reports whether the lease row of a mutex still has a lease
// running: a release leaves it (the release writes nothing).
func leaseRuns(t *testing.T, name string) bool {
	t.Helper()
	ctx, c := adminConn(t)
	var runs bool
	if err := c.QueryRow(ctx, `SELECT coalesce(expires > clock_timestamp(), false) FROM baton_leases
WHERE kind = 'mutex' AND name = $1`, name).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestReleaseMark: a release leaves the lease on the row and takes its
// mark instead; the next holder, of another Backend or of the same
// connection, sees the mark and does not wait the lease out.
func TestReleaseMark(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	m1 := mutexT(t, openT(t, url+"&pool_max_conns=1"), "mark")
	m2 := mutexT(t, openT(t, url), "mark")
	if _, err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !leaseRuns(t, "mark") {
		t.Fatal("the release cleared the lease: the mark is not what the next holder relies on")
	}
	lockQuickly(t, m2)
	// The same session again, over a lease its own release left.
	lockQuickly(t, m1)
	lockQuickly(t, m1)
}

// marksHeld counts the advisory locks that the sessions other than the
// test's own hold.
func marksHeld(t *testing.T) int {
	t.Helper()
	ctx, c := adminConn(t)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
	AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReleaseMarksBounded: a connection gives up the mark of a name when
// it takes the name again, so marks do not pile up in the server's lock
// table.
func TestReleaseMarksBounded(t *testing.T) {
	url := need(t)
	b := openT(t, url+"&pool_max_conns=1")
	before := marksHeld(t)
	ms := make([]baton.Mutex, 3)
	for i := range ms {
		ms[i] = mutexT(t, b, fmt.Sprintf("bounded-%d", i))
	}
	for range 50 {
		for _, m := range ms {
			lockQuickly(t, m)
		}
	}
	if n := marksHeld(t) - before; n != len(ms) {
		t.Errorf("%d advisory locks held after releases of %d names, want one mark per name", n, len(ms))
	}
}

// TestCloseClearsMarks: closing a Backend ends the sessions of its pool,
// and their marks with them; Close clears the leases its releases left
// first, so the next holder does not wait them out.
func TestCloseClearsMarks(t *testing.T) {
	url := need(t)
	b1 := openT(t, url)
	m1 := mutexT(t, b1, "close-marks")
	if _, err := m1.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m1.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	m1.Close()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	lockQuickly(t, mutexT(t, openT(t, url), "close-marks"))
}

// TestReleasedThenEnded: a session that released and then ended took its
// mark with it: the next holder waits out what is left of the lease,
// since it cannot tell that session from one that ended holding.
func TestReleasedThenEnded(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	m1 := mutexT(t, openT(t, url+"&pool_max_conns=1"), "released-ended")
	if _, err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	pids := holderPIDs(t, baton.KindMutex, "released-ended")
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	admin(t, "SELECT pg_terminate_backend($1)", pids[0])
	start := time.Now()
	m2 := mutexT(t, openT(t, url), "released-ended")
	if _, err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < faultTTL/4 {
		t.Errorf("Lock after the releasing session ended waited %v, not the rest of its lease", d)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
