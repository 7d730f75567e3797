package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestDyingSessionOrder pins what a terminated session lets a waiter see
// at the moment the waiter is granted a lock that the session held, which
// decides how an acquirer can tell a holder that released from one whose
// session ended: the dying session gives back its session-level locks
// partition by partition, waking waiters as it goes, while it still shows
// in pg_stat_activity and may still hold its other session-level locks (so
// neither is a sound sign that it lives); but it aborts its transaction
// first, so a transaction-level lock of its open transaction is always
// gone by then.
func TestDyingSessionOrder(t *testing.T) {
	url := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	const rounds = 50
	var seen, otherHeld, xactHeld int
	for i := range rounds {
		k, l, x := int64(7770000+3*i), int64(7770001+3*i), int64(7770002+3*i)
		h, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		var pid, wpid int
		if err := w.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&wpid); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Exec(ctx, `BEGIN`); err != nil {
			t.Fatal(err)
		}
		if err := h.QueryRow(ctx, `SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock($1), pg_advisory_lock($2),
	pg_advisory_xact_lock($3)) s`, k, l, x).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		type seenBy struct{ alive, other, xact bool }
		got := make(chan seenBy, 1)
		go func() {
			var s seenBy
			err := w.QueryRow(ctx, `WITH g AS MATERIALIZED (SELECT pg_advisory_lock($1)::text)
SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $2), NOT pg_try_advisory_lock($3), NOT pg_try_advisory_lock($4) FROM g`,
				k, pid, l, x).Scan(&s.alive, &s.other, &s.xact)
			if err != nil {
				t.Error(err)
			}
			got <- s
		}()
		// Terminate the holder once the waiter waits for its lock.
		var waiting bool
		for !waiting {
			if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $1 AND NOT granted)`, wpid).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		s := <-got
		if s.alive {
			seen++
		}
		if s.other {
			otherHeld++
		}
		if s.xact {
			xactHeld++
		}
		h.Close(ctx)
		w.Close(ctx)
	}
	t.Logf("of %d terminated holders, at the waiter's grant: still in pg_stat_activity %d, another session lock still held %d, the transaction lock still held %d",
		rounds, seen, otherHeld, xactHeld)
	if xactHeld > 0 {
		t.Errorf("a terminated session's transaction-level lock was still held at the grant of its session-level lock %d times of %d", xactHeld, rounds)
	}
}
