package baton_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// A producer puts jobs (one delayed, one with a key that a second Put
// finds pending); a worker claims each, does it while its claim holds,
// and acks it. A worker that dies instead gives its job back.
func ExampleQueue() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, _ := local.Open(dir)
	defer b.Close()
	q, _ := b.Queue(ctx, "mail/outbox")

	first, _ := q.Put(ctx, []byte("welcome mail"), baton.UniqueKey("welcome/42"))
	again, _ := q.Put(ctx, []byte("welcome mail"), baton.UniqueKey("welcome/42"))
	fmt.Println("same job:", first == again)
	q.Put(ctx, []byte("reminder"), baton.Delay(20*time.Millisecond))

	for range 2 {
		j, err := q.Claim(ctx) // blocks until a job is ready
		if err != nil {
			fmt.Println(err)
			return
		}
		// Work under jctx, which ends if the claim is lost; give
		// j.Token() to a fence so that a stale worker's write is refused.
		jctx, cancel := j.Context(ctx)
		fmt.Printf("sending %s (attempt %d)\n", j.Payload(), j.Attempt())
		_ = jctx
		cancel()
		if err := j.Ack(ctx); err != nil {
			fmt.Println(err)
		}
	}
	s, _ := q.Stats(ctx)
	fmt.Printf("%+v\n", s)
	// Output:
	// same job: true
	// sending welcome mail (attempt 1)
	// sending reminder (attempt 1)
	// {Ready:0 Delayed:0 InFlight:0 Dead:0}
}
