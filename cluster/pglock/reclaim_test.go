package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestSweepDeadHolderRow: the lease row of a holder whose session ended
// without a release is deleted by the next Backend set up on the database
// once the lease ran out; until then it stays, so its lease is waited out.
func TestSweepDeadHolderRow(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	b := openT(t, url)
	m := mutexT(t, b, "sweep-dead")
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	terminateHolder(t, baton.KindMutex, "sweep-dead")
	rows := func() int {
		_, c := adminConn(t)
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM baton_leases WHERE kind = 'mutex' AND name = 'sweep-dead'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	setUp := func() {
		if _, err := openT(t, url).(baton.Inspector).List(ctx); err != nil { // sets up the schema
			t.Fatal(err)
		}
	}
	setUp() // the lease still runs
	if n := rows(); n != 1 {
		t.Fatalf("%d lease rows of a dead holder within its lease, want 1", n)
	}
	time.Sleep(faultTTL + 100*time.Millisecond)
	setUp()
	if n := rows(); n != 0 {
		t.Fatalf("%d lease rows of a dead holder after its lease, want 0", n)
	}
	_ = m.Unlock(ctx)
}
