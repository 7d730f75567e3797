package pglock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
	"github.com/batonlock/baton/cluster/lease"
)

// BenchmarkQueuePutClaimAck: one Put, TryClaim and Ack per op on one
// handle, uncontended.
func BenchmarkQueuePutClaimAck(b *testing.B) {
	ctx := context.Background()
	bk, err := OpenURL(ctx, need(b), lease.WithTTL(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	q, err := bk.Queue(ctx, fmt.Sprint("bench-", time.Now().UnixNano()))
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := []byte("payload of a job")
	for b.Loop() {
		if _, err := q.Put(ctx, payload); err != nil {
			b.Fatal(err)
		}
		j, err := q.TryClaim(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueueWorkers16: 16 handles of one Backend claim and ack jobs
// of a backlog put before the timer starts; an op is one job.
func BenchmarkQueueWorkers16(b *testing.B) {
	ctx := context.Background()
	bk, err := OpenURL(ctx, need(b), lease.WithTTL(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	name := fmt.Sprint("bench-w16-", time.Now().UnixNano())
	feed, err := bk.Queue(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	defer feed.Close()
	specs := make([]baton.JobSpec, 100)
	for i := range specs {
		specs[i].Payload = []byte("no-op job")
	}
	for put := 0; put < b.N; put += len(specs) {
		if _, err := feed.PutBatch(ctx, specs); err != nil {
			b.Fatal(err)
		}
	}
	hs := make([]baton.Queue, 16)
	for i := range hs {
		if hs[i], err = bk.Queue(ctx, name); err != nil {
			b.Fatal(err)
		}
		defer hs[i].Close()
	}
	queuecheck.Drain(b, hs, b.N)
}
