package local_test

import (
	"context"
	"testing"

	"github.com/batonlock/baton/local"
)

// BenchmarkQueuePutClaimAck: one job through the public API, as the
// driver's BenchmarkPutClaimAck (local/shmqueue) measures it without the
// core: Claim (which may wait), TryClaim (which may not).
func BenchmarkQueuePutClaimAck(b *testing.B) {
	ctx := context.Background()
	be, err := local.Open(shmDir(b))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	q, err := be.Queue(ctx, "bench/q")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := []byte("job")
	for _, wait := range []bool{true, false} {
		name := "Claim"
		if !wait {
			name = "TryClaim"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := q.Put(ctx, payload); err != nil {
					b.Fatal(err)
				}
				claim := q.Claim
				if !wait {
					claim = q.TryClaim
				}
				j, err := claim(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := j.Ack(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
