package mysqllock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestQueueGatheredClaims: claims of several handles of one Backend that
// come while a claim waits are made by one statement (one owner); each
// handle renews its own past the TTL, and closing one handle gives back
// its job only.
func TestQueueGatheredClaims(t *testing.T) {
	const n = 8
	s := sharedServer(t)
	admin := s.admin(t)
	createDB(t, s, "baton")
	b := openT(t, s.url("ttl=2s"))
	name := fmt.Sprint("gathered-", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var qs []baton.Queue
	for range n {
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
	if _, err := qs[0].PutBatch(ctx, specs); err != nil {
		t.Fatal(err)
	}
	// With the queue's token row locked, the first claim waits for it and
	// the others gather behind it.
	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tok uint64
	if err := tx.QueryRowContext(ctx, "SELECT token FROM baton.`baton_lock` WHERE name = ? FOR UPDATE", key('q', name)).Scan(&tok); err != nil {
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
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var owners int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(DISTINCT owner) FROM baton.`baton_job` WHERE queue = ? AND owner <> ''", name).Scan(&owners); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d claims by %d statements", n, owners)
	if owners > 3 {
		t.Fatalf("%d claims made by %d statements: not gathered", n, owners)
	}
	seen := map[baton.Token]bool{}
	for _, j := range jobs {
		if seen[j.Token()] {
			t.Fatalf("token %d given twice", j.Token())
		}
		seen[j.Token()] = true
	}
	time.Sleep(3 * time.Second) // past the TTL: each handle renewed its own
	for i, j := range jobs {
		if err := j.Err(); err != nil {
			t.Fatalf("claim of handle %d lost: %v", i, err)
		}
	}
	if err := qs[0].Close(); err != nil {
		t.Fatal(err)
	}
	st, err := qs[1].Stats(ctx)
	if err != nil || st != (baton.QueueStats{Ready: 1, InFlight: n - 1}) {
		t.Fatalf("after closing one handle: %+v, %v", st, err)
	}
	again, err := qs[1].TryClaim(ctx)
	if err != nil || again.ID() != jobs[0].ID() || again.Token() <= jobs[0].Token() {
		t.Fatalf("claimed again: %v %v; the closed handle's job %d", again, err, jobs[0].ID())
	}
	for _, j := range append(jobs[1:], again) {
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := qs[1].Stats(ctx); err != nil || st != (baton.QueueStats{}) {
		t.Fatalf("at the end: %+v, %v", st, err)
	}
}
