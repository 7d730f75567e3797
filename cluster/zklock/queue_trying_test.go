package zklock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestQueueClaimantsOfOneBackendTryDifferentJobs: workers on handles of
// one Backend, claiming from a backlog together, each take a different
// job rather than all the oldest (when all tried the oldest, one got it
// and every other read the queue again, most claims being conflicts).
func TestQueueClaimantsOfOneBackendTryDifferentJobs(t *testing.T) {
	const workers, jobs = 8, 160
	b := open(t, "zk://"+standalone(t)+"/qtrying")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("trying-%d", time.Now().UnixNano())
	qs := make([]baton.Queue, workers)
	for i := range qs {
		q, err := b.Queue(ctx, name)
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
	marked := len(trying.m)
	trying.mu.Unlock()
	if marked != 0 {
		t.Errorf("%d records still marked after every claim ended", marked)
	}
}

// TestQueueClaimantsKeepUpWithTheFlow: workers of one Backend claiming
// from a queue fed as fast as they ack read almost no record that is gone.
// A read names the jobs done since; a claimant that walked its read one
// record at a time fell behind the others' acks and did no job for
// hundreds of milliseconds while they worked.
func TestQueueClaimantsKeepUpWithTheFlow(t *testing.T) {
	const workers, jobs, backlog = 16, 800, 64
	b := open(t, "zk://"+standalone(t)+"/qflow")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("flow-%d", time.Now().UnixNano())
	qs := make([]baton.Queue, workers+1)
	for i := range qs {
		q, err := b.Queue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		qs[i] = q
	}
	var put, done atomic.Int64
	feed := func() error {
		for put.Load() < jobs && put.Load()-done.Load() < backlog {
			specs := make([]baton.JobSpec, min(backlog/4, jobs-int(put.Load())))
			for i := range specs {
				specs[i] = baton.JobSpec{Payload: []byte("job")}
			}
			if _, err := qs[workers].PutBatch(ctx, specs); err != nil {
				return err
			}
			put.Add(int64(len(specs)))
		}
		return nil
	}
	if err := feed(); err != nil {
		t.Fatal(err)
	}
	before := staleReads.Load()
	var feeding sync.Mutex
	claimAckAll(t, ctx, qs[:workers], jobs, func() error {
		done.Add(1)
		if !feeding.TryLock() {
			return nil
		}
		defer feeding.Unlock()
		return feed()
	})
	if n := staleReads.Load() - before; n > jobs/20 {
		t.Errorf("claims read %d records that were gone, for %d jobs", n, jobs)
	}
	trying.mu.Lock()
	kept := len(trying.gone)
	ring := len(trying.ring)
	trying.mu.Unlock()
	if kept > goneKept || ring > goneKept {
		t.Errorf("%d gone records kept (ring %d), want at most %d", kept, ring, goneKept)
	}
}

// claimAckAll has one worker per queue claim and ack jobs jobs between
// them, calling after (when set) after each Ack.
func claimAckAll(t *testing.T, ctx context.Context, qs []baton.Queue, jobs int64, after func() error) {
	t.Helper()
	var left atomic.Int64
	left.Store(jobs)
	var wg sync.WaitGroup
	errs := make(chan error, len(qs))
	for _, q := range qs {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				j, err := q.Claim(ctx)
				if err == nil {
					err = j.Ack(ctx)
				}
				if err == nil && after != nil {
					err = after()
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
}

// TestQueueClaimantsOfManyBackendsSpread: claimants of several Backends
// (as of several processes, which do not see each other's marks) draining
// one backlog mostly take different jobs: when all tried the oldest, all
// but one found it taken and listed the queue again, several times a job.
func TestQueueClaimantsOfManyBackendsSpread(t *testing.T) {
	const workers, jobs = 8, 400
	url := "zk://" + standalone(t) + "/qspread"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("spread-%d", time.Now().UnixNano())
	qs := make([]baton.Queue, workers)
	for i := range qs {
		q, err := open(t, url).Queue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		qs[i] = q
	}
	start := time.Now()
	n := drainTogether(t, ctx, qs, jobs)
	t.Logf("%d claims found another claimant had come between, for %d jobs (%v)", n, jobs, time.Since(start).Round(time.Millisecond))
	if n >= jobs {
		t.Errorf("%d claims of %d jobs found another claimant had come between", n, jobs)
	}
}

// drainTogether puts jobs on qs[0] in four batches and has one worker per
// handle claim and ack them all; it returns how many claims found another
// claimant had come between, and checks that the queue is empty after.
func drainTogether(t *testing.T, ctx context.Context, qs []baton.Queue, jobs int64) int64 {
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
	claimAckAll(t, ctx, qs, jobs, nil)
	n := claimConflicts.Load() - before
	if s, err := qs[0].Stats(ctx); err != nil || s != (baton.QueueStats{}) {
		t.Errorf("Stats = %+v, %v; want an empty queue", s, err)
	}
	return n
}
