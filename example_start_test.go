package baton_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// Open takes a URL, so the backend can come from configuration: this
// program runs on one machine with "local:///DIR" and on a cluster with,
// say, "redis://host:6379" or "postgres://host/db", provided it imports
// the backend's package (local here; cluster/redislock, cluster/pglock, …).
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	b, err := baton.Open(ctx, "local://"+dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	m, _ := b.Mutex(ctx, "cache/rebuild")
	hold, _ := m.Lock(ctx)
	fmt.Println("token:", hold.Token())
	fmt.Println(m.Unlock(ctx))

	_, err = baton.Open(ctx, "nosuch://host")
	fmt.Println(errors.Is(err, baton.ErrInvalidArgument))
	// Output:
	// token: 1
	// <nil>
	// true
}

// A semaphore of 4 permits caps GPU jobs at four, whichever processes
// run them; Acquire(ctx, n) takes n of them.
func ExampleSemaphore() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, _ := local.Open(dir)
	defer b.Close()

	gpu, _ := b.Semaphore(ctx, "gpu", 4)
	_, _ = gpu.Acquire(ctx, 3) // a job that needs three
	other, _ := b.Semaphore(ctx, "gpu", 4)
	_, err := other.TryAcquire(ctx, 2)
	fmt.Println("two more:", errors.Is(err, baton.ErrLocked))
	_, err = other.TryAcquire(ctx, 1)
	fmt.Println("one more:", err)
	fmt.Println(gpu.Release(ctx, 3), other.Release(ctx, 1))

	_, err = b.Semaphore(ctx, "gpu", 2) // the capacity is fixed at creation
	fmt.Println("other capacity:", errors.Is(err, baton.ErrMismatch))
	// Output:
	// two more: true
	// one more: <nil>
	// <nil> <nil>
	// other capacity: true
}

// A consumer waits on a Cond for a condition that producers make true
// under the same lock, as with sync.Cond; Wait unlocks while it waits and
// locks again before it returns.
func ExampleCond() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, _ := local.Open(dir)
	defer b.Close()
	m, _ := b.Mutex(ctx, "jobs")
	c, _ := b.Cond(ctx, "jobs/ready")
	v, _ := b.Value(ctx, "jobs/count") // the condition: a job was put

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the consumer
		defer wg.Done()
		_, _ = m.Lock(ctx)
		defer m.Unlock(ctx)
		for {
			data, _, _ := v.Load(ctx)
			if len(data) > 0 {
				fmt.Println("got:", string(data))
				return
			}
			if err := c.Wait(ctx, m); err != nil {
				fmt.Println(err)
				return
			}
		}
	}()

	// The producer: change the state under the lock, then signal.
	producer, _ := b.Mutex(ctx, "jobs")
	_, _ = producer.Lock(ctx)
	_, _ = v.CompareAndSwap(ctx, 0, []byte("job 1"))
	_ = c.Broadcast(ctx)
	_ = producer.Unlock(ctx)
	wg.Wait()
	// Output:
	// got: job 1
}

// Observe reports what the core does on every primitive of a Backend;
// LogObserver logs it with log/slog and package metrics exports it to
// Prometheus. Here an Observer of one's own counts handoffs and waits.
func ExampleObserve() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, _ := local.Open(dir)
	defer b.Close()

	var mu sync.Mutex
	counts := map[baton.EventType]int{}
	_ = baton.Observe(b, observerFunc(func(e baton.Event) {
		mu.Lock()
		counts[e.Type]++
		mu.Unlock()
	}))
	m, _ := b.Mutex(ctx, "observed")
	for range 3 {
		_, _ = m.Lock(ctx)
		_ = m.Unlock(ctx)
	}
	mu.Lock()
	fmt.Println("acquired:", counts[baton.EventAcquired], "released:", counts[baton.EventReleased])
	mu.Unlock()
	// Output:
	// acquired: 3 released: 3
}

type observerFunc func(baton.Event)

func (f observerFunc) Observe(e baton.Event) { f(e) }
