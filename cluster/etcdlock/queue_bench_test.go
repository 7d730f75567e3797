package etcdlock

import (
	"context"
	"testing"

	"github.com/batonlock/baton"
)

// BenchmarkQueueUncontended: one goroutine putting, claiming (TryClaim)
// and acking one job at a time on a single-member server.
func BenchmarkQueueUncontended(b *testing.B) {
	benchQueue(b, newBenchEnv(b).be)
}

func benchQueue(b *testing.B, be baton.Backend) {
	ctx := context.Background()
	q, err := be.Queue(ctx, "bench-queue")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := []byte("job")
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
