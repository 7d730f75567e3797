package zklock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkQueueUncontended: one goroutine putting, claiming (TryClaim)
// and acking one job at a time on the standalone server.
func BenchmarkQueueUncontended(b *testing.B) {
	ctx := context.Background()
	bk, _ := benchBackend(b)
	q, err := bk.Queue(ctx, fmt.Sprint("bench-queue-", time.Now().UnixNano()))
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
