package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestQueueGatheredClaims: claims of several handles of one Backend that
// come while a claim statement waits are served by one statement, each
// row recorded with the session of the handle that holds it, so that
// ending that session loses that claim, and only it, before the job is
// claimed again; Acks that come together end their claims together.
func TestQueueGatheredClaims(t *testing.T) {
	const n = 8
	name := fmt.Sprint("gathered-", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	b, q0 := openQueueTTL(t, name, 3*time.Second)
	qs := []baton.Queue{q0}
	for len(qs) < n {
		q, err := b.Queue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		qs = append(qs, q)
	}
	specs := make([]baton.JobSpec, n)
	for i := range specs {
		specs[i].Payload = fmt.Appendf(nil, "job %d", i)
	}
	if _, err := q0.PutBatch(ctx, specs); err != nil {
		t.Fatal(err)
	}
	// With the queue's token row locked, the first claim statement waits
	// for it and the other claims gather behind it.
	actx, admin := adminConn(t)
	tx, err := admin.Begin(actx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(actx, `SELECT token FROM baton_queues WHERE queue = $1 FOR UPDATE`, name); err != nil {
		t.Fatal(err)
	}
	jobs := make([]*baton.Job, n)
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Go(func() {
			j, err := q.Claim(ctx)
			if err != nil {
				t.Error(err)
			}
			jobs[i] = j
		})
	}
	time.Sleep(500 * time.Millisecond)
	if err := tx.Commit(actx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Rows written by one statement share its transaction id.
	var statements, sessions int
	if err := admin.QueryRow(actx, `SELECT count(DISTINCT xmin::text), count(DISTINCT claimant) FROM baton_jobs WHERE queue = $1 AND state = 1`, name).Scan(&statements, &sessions); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d claims by %d statements, on %d sessions", n, statements, sessions)
	if statements > 3 {
		t.Fatalf("%d claims made by %d statements: not gathered", n, statements)
	}
	if sessions != n {
		t.Fatalf("%d claims of %d handles recorded with %d sessions", n, n, sessions)
	}
	// End the session recorded for the claim of the last handle, which a
	// gathered statement made.
	victim := jobs[n-1]
	var ended bool
	if err := admin.QueryRow(actx, `SELECT pg_terminate_backend(claimant, 5000) FROM baton_jobs WHERE id = $1`, int64(victim.ID())).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminating the claimant session: %v %v", ended, err)
	}
	select {
	case <-victim.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the claim whose session ended was not lost within its TTL")
	}
	for i, j := range jobs[:n-1] {
		if err := j.Err(); err != nil {
			t.Fatalf("handle %d's claim lost with another handle's session: %v", i, err)
		}
	}
	errs := make([]error, n)
	for i, j := range jobs {
		wg.Go(func() { errs[i] = j.Ack(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if lost := errors.Is(err, baton.ErrLost); (i == n-1) != lost || (i != n-1 && err != nil) {
			t.Fatalf("Ack %d: %v", i, err)
		}
	}
	again, err := q0.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID() != victim.ID() || again.Attempt() != 2 || again.Token() <= victim.Token() {
		t.Fatalf("claimed again: id %d attempt %d token %d; lost: id %d token %d", again.ID(), again.Attempt(), again.Token(), victim.ID(), victim.Token())
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	wantQueueStats(t, "at the end", q0, baton.QueueStats{})
}
