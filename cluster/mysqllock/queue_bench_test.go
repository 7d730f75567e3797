package mysqllock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkQueueUncontended: one goroutine putting, claiming (TryClaim)
// and acking one job at a time.
func BenchmarkQueueUncontended(b *testing.B) {
	s := sharedServer(b)
	createDB(b, s, "baton")
	ctx := context.Background()
	bk, err := OpenURL(ctx, s.url(""))
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
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
