package etcdlock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// testQueueClaimantsOfOneBackendTryDifferentJobs: workers on handles of
// one Backend, claiming from a backlog together, each take a different
// job rather than all the oldest (when all tried the oldest, one got it
// and every other read the queue again, most claims being conflicts).
func testQueueClaimantsOfOneBackendTryDifferentJobs(t *testing.T, c *cluster) {
	const workers, jobs = 8, 160
	b, _ := fast(t, c, "qtrying/")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	qs := make([]baton.Queue, workers)
	for i := range qs {
		q, err := b.Queue(ctx, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		qs[i] = q
	}
	if n := drainTogether(t, ctx, qs, jobs); n > jobs/2 {
		t.Errorf("%d claims of %d found another claimant had come between", n, jobs)
	}
	trying.mu.Lock()
	left2 := len(trying.m)
	trying.mu.Unlock()
	if left2 != 0 {
		t.Errorf("%d records still marked after every claim ended", left2)
	}
}

// testQueueClaimantsOfManyBackendsSpread: claimants of several Backends
// (as of several processes, which do not see each other's marks) draining
// one backlog mostly take different jobs: when all tried the oldest, all
// but one found it taken and read the queue again, several times a job.
func testQueueClaimantsOfManyBackendsSpread(t *testing.T, c *cluster) {
	const workers, jobs = 8, 1000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	qs := make([]baton.Queue, workers)
	for i := range qs {
		b, _ := fast(t, c, "qspread/")
		q, err := b.Queue(ctx, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		qs[i] = q
	}
	n := drainTogether(t, ctx, qs, jobs)
	t.Logf("%d claims found another claimant had come between, for %d jobs", n, jobs)
	if n >= jobs {
		t.Errorf("%d claims of %d jobs found another claimant had come between", n, jobs)
	}
}

// drainTogether puts jobs on qs[0] and has every handle of qs claim and
// ack them until none is left; it returns how many claims found another
// claimant had come between, and checks the queue is empty after.
func drainTogether(t *testing.T, ctx context.Context, qs []baton.Queue, jobs int) int64 {
	t.Helper()
	specs := make([]baton.JobSpec, jobs/4)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: []byte("job")}
	}
	for range 4 {
		if _, err := qs[0].PutBatch(ctx, specs); err != nil {
			t.Fatal(err)
		}
	}
	before := claimConflicts.Load()
	var left atomic.Int64
	left.Store(int64(jobs))
	var wg sync.WaitGroup
	errs := make(chan error, len(qs))
	for _, q := range qs {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				j, err := q.Claim(ctx)
				if err == nil {
					err = j.Ack(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := claimConflicts.Load() - before
	if s, err := qs[0].Stats(ctx); err != nil || s != (baton.QueueStats{}) {
		t.Errorf("Stats = %+v, %v; want an empty queue", s, err)
	}
	return n
}
