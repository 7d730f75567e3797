package recipe_test

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/recipe"
)

// Two accounts on one host locked together for a transfer; a second
// transfer in the other direction lists them the other way round and
// cannot deadlock with the first.
func ExampleMultiLock() {
	dir, _ := os.MkdirTemp("", "recipe-example")
	defer os.RemoveAll(dir)
	b, _ := local.Open(dir) // or redislock.OpenURL, etcdlock.OpenURL: the rest is the same
	defer b.Close()
	ctx := context.Background()

	var wg sync.WaitGroup
	for _, names := range [][]string{{"acct/a", "acct/b"}, {"acct/b", "acct/a"}} {
		ml, err := recipe.NewMultiLock(ctx, recipe.Parts("local", b, names...)...)
		if err != nil {
			panic(err)
		}
		defer ml.Close()
		wg.Go(func() {
			for range 100 {
				h, err := ml.Lock(ctx)
				if err != nil {
					panic(err)
				}
				_ = h.Token(0) // fence writes to names[0] with its token
				if err := ml.Unlock(ctx); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	fmt.Println("200 transfers, no deadlock")
	// Output: 200 transfers, no deadlock
}

// A candidate campaigns, publishes its address, and works under the
// leadership's context, which ends if the leadership is lost.
func ExampleElection() {
	dir, _ := os.MkdirTemp("", "recipe-example")
	defer os.RemoveAll(dir)
	b, _ := local.Open(dir)
	defer b.Close()
	ctx := context.Background()

	el, _ := recipe.NewElection(ctx, b, "scheduler")
	defer el.Close()
	l, err := el.Campaign(ctx, []byte("10.0.0.7:8080")) // waits until leader
	if err != nil {
		panic(err)
	}
	work, cancel := l.Context(ctx)
	_ = work // do the leader's work under it
	cur, _ := el.Leader(ctx)
	fmt.Printf("leader %s\n", cur.Value)
	cancel()
	_ = l.Resign(ctx)
	_, err = el.Leader(ctx)
	fmt.Println(err)
	// Output:
	// leader 10.0.0.7:8080
	// recipe: no leader
}

// Three workers count a latch down; the coordinator waits for all three.
func ExampleLatch() {
	dir, _ := os.MkdirTemp("", "recipe-example")
	defer os.RemoveAll(dir)
	b, _ := local.Open(dir)
	defer b.Close()
	ctx := context.Background()

	l, _ := recipe.NewLatch(ctx, b, "jobs/ready")
	defer l.Close()
	_, _ = l.TrySetCount(ctx, 3)
	for range 3 {
		go func() { _ = l.CountDown(ctx) }() // in other processes, as well
	}
	if err := l.Await(ctx); err != nil {
		panic(err)
	}
	fmt.Println("all three ready")
	// Output: all three ready
}

// A gate that one process closes while it prepares, and opens for the
// others.
func ExampleBarrier() {
	dir, _ := os.MkdirTemp("", "recipe-example")
	defer os.RemoveAll(dir)
	b, _ := local.Open(dir)
	defer b.Close()
	ctx := context.Background()

	gate, _ := recipe.NewBarrier(ctx, b, "deploy/gate")
	defer gate.Close()
	_ = gate.Set(ctx)
	done := make(chan struct{})
	go func() {
		_ = gate.Wait(ctx) // returns once the gate is removed
		close(done)
	}()
	_ = gate.Remove(ctx)
	<-done
	fmt.Println("through the gate")
	// Output: through the gate
}

// Three members start a phase together and finish it together.
func ExampleDoubleBarrier() {
	dir, _ := os.MkdirTemp("", "recipe-example")
	defer os.RemoveAll(dir)
	b, _ := local.Open(dir)
	defer b.Close()
	ctx := context.Background()

	var wg sync.WaitGroup
	for range 3 {
		d, _ := recipe.NewDoubleBarrier(ctx, b, "phase", 3)
		defer d.Close()
		wg.Go(func() {
			m, err := d.Enter(ctx) // waits for all three
			if err != nil {
				panic(err)
			}
			// ... the phase's work ...
			if err := m.Leave(ctx); err != nil { // waits for all three
				panic(err)
			}
		})
	}
	wg.Wait()
	fmt.Println("phase done")
	// Output: phase done
}
