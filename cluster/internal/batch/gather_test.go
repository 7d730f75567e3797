package batch

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGather: calls from many goroutines are each served once, by one
// batch at a time, in batches no heavier than the limit (a call heavier
// than it alone), and calls that come while a batch runs share the next.
func TestGather(t *testing.T) {
	type call struct{ weight, served int }
	const goroutines, each, limit = 32, 100, 8
	var (
		g       Gather[call]
		running atomic.Int32
		batches atomic.Int64
		wg      sync.WaitGroup
	)
	run := func(batch []*Gathered[call]) {
		if running.Add(1) != 1 {
			t.Error("two batches ran at once")
		}
		batches.Add(1)
		w := 0
		for _, c := range batch {
			w += c.V.weight
			c.V.served++
		}
		if len(batch) > 1 && w > limit {
			t.Errorf("a batch of %d calls weighs %d, over %d", len(batch), w, limit)
		}
		time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
		running.Add(-1)
	}
	for range goroutines {
		wg.Go(func() {
			for range each {
				c := &Gathered[call]{V: call{weight: 1 + rand.IntN(limit+2)}}
				g.Do(c, limit, func(c *call) int { return c.weight }, run)
				if c.V.served != 1 {
					t.Errorf("a call returned served %d times", c.V.served)
					return
				}
			}
		})
	}
	wg.Wait()
	if g.busy || len(g.pending) != 0 {
		t.Fatalf("left busy %v with %d calls pending", g.busy, len(g.pending))
	}
	n := batches.Load()
	t.Logf("%d calls in %d batches", goroutines*each, n)
	if n >= goroutines*each {
		t.Fatalf("no call was gathered with another: %d batches for %d calls", n, goroutines*each)
	}
}

// TestWaiting: calls that come while a batch runs count as waiting until
// the next batch takes them.
func TestWaiting(t *testing.T) {
	var g Gather[int]
	first, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		g.Do(&Gathered[int]{}, 8, func(*int) int { return 1 }, func([]*Gathered[int]) {
			close(first)
			<-release
		})
	})
	<-first
	var sizes []int
	var mu sync.Mutex
	for range 3 {
		wg.Go(func() {
			g.Do(&Gathered[int]{}, 8, func(*int) int { return 1 }, func(b []*Gathered[int]) {
				mu.Lock()
				sizes = append(sizes, len(b))
				mu.Unlock()
			})
		})
	}
	for g.Waiting() < 3 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if g.Waiting() != 0 || len(sizes) != 1 || sizes[0] != 3 {
		t.Fatalf("waiting %d after; batches after the first: %v, want one of 3", g.Waiting(), sizes)
	}
}
