package pglock

import (
	"context"
	"fmt"
	"testing"
	"time"

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
