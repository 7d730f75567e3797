package redislock

import (
	"context"
	"testing"
)

// BenchmarkQueuePutClaimAck: one Put, TryClaim and Ack per op on one
// handle, uncontended.
func BenchmarkQueuePutClaimAck(b *testing.B) {
	s := startRedis(b)
	q, err := benchBackend(b, s.URL("")).Queue(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
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
