package etcdlock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// testQueueWindowOrder: one claimant drains a backlog large enough that
// its reads look at windows, with jobs given back (Retry) along the way:
// every job is claimed once, the backlog in the order it was put, and a
// job given back only after every job ready before it.
func testQueueWindowOrder(t *testing.T, c *cluster) {
	const batches, per = 25, 100
	b, _ := fast(t, c, "qwindow/")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	specs := make([]baton.JobSpec, per)
	var order []baton.JobID
	for k := range batches {
		for i := range specs {
			specs[i].Payload = fmt.Appendf(nil, "%d/%d", k, i)
		}
		ids, err := q.PutBatch(ctx, specs)
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, ids...)
		time.Sleep(2 * time.Millisecond) // batches ready at times apart
	}
	w0 := windowedReads.Load()
	retried := map[baton.JobID]bool{}
	for i := 0; i < len(order); i++ {
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if j.ID() != order[i] {
			t.Fatalf("claim %d took job %d (attempt %d), want %d", i, j.ID(), j.Attempt(), order[i])
		}
		if i%97 == 0 && !retried[j.ID()] {
			// Given back, it is ready after every job left.
			if err := j.Retry(ctx, 0); err != nil {
				t.Fatal(err)
			}
			retried[j.ID()] = true
			order = append(order, j.ID())
			continue
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.TryClaim(ctx); err == nil {
		t.Fatal("a job left after the drain")
	}
	// Windows are read while the backlog is above windowMost or so.
	if n, want := windowedReads.Load()-w0, int64(batches*per-2*windowMost)/2; n < want {
		t.Fatalf("%d of %d claims read a window, want %d or more", n, len(order), want)
	}
}

// testQueueWindowCut: a window of the earlier record form ends before a
// job given back (a record of the other form, ready now) is ready; with
// every job in the window claimed, the claim takes the oldest job past
// the window, not the younger job given back.
func testQueueWindowCut(t *testing.T, c *cluster) {
	const per = 20
	b, d := fast(t, c, "qcut/")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	specs := make([]baton.JobSpec, per)
	for i := range specs {
		specs[i].Payload = []byte("job")
	}
	if _, err := q.PutBatch(ctx, specs); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	between := time.Now().UnixNano()
	time.Sleep(2 * time.Millisecond)
	second, err := q.PutBatch(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	var held []*baton.Job
	for range per {
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, j)
	}
	if err := held[0].Retry(ctx, 0); err != nil {
		t.Fatal(err)
	}
	calls := d.queues.Hold(d.dir(baton.KindQueue, "jobs"))
	defer d.queues.Drop(d.dir(baton.KindQueue, "jobs"))
	calls.win.mu.Lock()
	calls.win.horizon = [2]int64{0, between} // j/ records read up to the second batch
	calls.win.mu.Unlock()
	w0 := windowedReads.Load()
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID() != second[0] || j.Attempt() != 1 {
		t.Fatalf("claimed job %d attempt %d; want the second batch's first, %d", j.ID(), j.Attempt(), second[0])
	}
	if windowedReads.Load() == w0 {
		t.Fatal("the claim did not read the window set")
	}
}
