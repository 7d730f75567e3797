//go:build linux

package shmqueue

import (
	"context"
	"testing"

	"github.com/batonlock/baton/driver"
)

// go test -bench . ./local/shmqueue: an uncontended Put, Claim and Ack of
// a 64-byte job, through the driver.
func BenchmarkPutClaimAck(b *testing.B) {
	q := openB(b)
	ctx := context.Background()
	job := []driver.PutJob{{Payload: make([]byte, 64), MaxAttempts: 1}}
	for b.Loop() {
		if _, err := q.Put(ctx, job); err != nil {
			b.Fatal(err)
		}
		cs, err := q.Claim(ctx, 1, false)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Ack(ctx, cs[0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWakeUp: a Put that wakes a claimant blocked in another
// goroutine, and its Ack; the time per op is the hand-over.
func BenchmarkWakeUp(b *testing.B) {
	q := openB(b)
	ctx, cancel := context.WithCancel(context.Background())
	job := []driver.PutJob{{Payload: make([]byte, 64), MaxAttempts: 1}}
	acked := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			cs, err := q.Claim(ctx, 1, true)
			if err != nil {
				return
			}
			_ = q.Ack(ctx, cs[0])
			acked <- struct{}{}
		}
	}()
	for b.Loop() {
		if _, err := q.Put(ctx, job); err != nil {
			b.Fatal(err)
		}
		<-acked
	}
	cancel()
	<-ended
}
