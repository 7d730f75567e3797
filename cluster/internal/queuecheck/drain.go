package queuecheck

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Drain has each of hs claim and ack jobs until n were done between them
// (the queue must hold them already), timed by b, and reports jobs per
// second and the fairness of claims: the fewest jobs one handle did over
// the most.
func Drain(b *testing.B, hs []baton.Queue, n int) {
	ctx := context.Background()
	per := make([]int, len(hs))
	var wg sync.WaitGroup
	var done atomic.Int64
	b.ResetTimer()
	t0 := time.Now()
	for i, h := range hs {
		wg.Go(func() {
			for done.Add(1) <= int64(n) {
				j, err := h.Claim(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := j.Ack(ctx); err != nil {
					b.Error(err)
					return
				}
				per[i]++
			}
		})
	}
	wg.Wait()
	el := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(n)/el.Seconds(), "jobs/s")
	if lo, hi := slices.Min(per), slices.Max(per); hi > 0 {
		b.ReportMetric(float64(lo)/float64(hi), "fairness")
	}
}

// PutJobs puts at least n jobs on q, in batches of 250, and returns their
// ids.
func PutJobs(b *testing.B, q baton.Queue, n int) []baton.JobID {
	specs := make([]baton.JobSpec, 250)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: []byte("job")}
	}
	var ids []baton.JobID
	for len(ids) < n {
		got, err := q.PutBatch(context.Background(), specs)
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, got...)
	}
	return ids
}

// ClaimAck claims and acks n jobs of q, one at a time.
func ClaimAck(b *testing.B, q baton.Queue, n int) {
	ctx := context.Background()
	for range n {
		j, err := q.TryClaim(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
