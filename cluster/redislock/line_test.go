package redislock

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Goroutines on several handles of several Backends lock one name, some
// with a context that ends at a random moment around a handoff, for a
// while. Nobody holds while another does, tokens grow with every grant, a
// cancelled Lock holds nothing, and once all are done the lock is free at
// once (no grant leaked to a waiter that gave up) and the line's keys are
// gone. The TTL is long, so a leaked grant would hold the name for it.
func TestLineHammer(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	url := s.URL("ttl=30s")
	const name = "line-hammer"
	// Ten Backends with one handle each (every grant is a server handoff)
	// and two with three (handles of one Backend also pass it among
	// themselves).
	var ms []baton.Mutex
	for i := range 12 {
		b := open(t, url)
		for range 1 + 2*(i/10) {
			ms = append(ms, mutex(t, b, name))
		}
	}
	var inside atomic.Int32
	var mu sync.Mutex // guards last
	var last uint64
	var grants, cancels atomic.Int64
	end := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for time.Now().Before(end) {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if r.IntN(3) == 0 {
					// About as long as a wait in line: some end as the
					// lock is handed to them.
					ctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(3000))*time.Microsecond)
				}
				h, err := m.Lock(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Lock: %v", err)
						return
					}
					cancels.Add(1)
					continue
				}
				if !inside.CompareAndSwap(0, 1) {
					t.Error("two holders at once")
				}
				mu.Lock()
				if tok := uint64(h.Token()); tok <= last {
					t.Errorf("token %d after %d", tok, last)
				} else {
					last = tok
				}
				mu.Unlock()
				time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
				inside.Store(0)
				grants.Add(1)
				if err := m.Unlock(context.Background()); err != nil {
					t.Errorf("Unlock: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d grants, %d cancelled waits", grants.Load(), cancels.Load())
	if grants.Load() == 0 || cancels.Load() == 0 {
		t.Fatalf("%d grants and %d cancelled waits: the test tested nothing", grants.Load(), cancels.Load())
	}
	other := mutex(t, open(t, url), name)
	if _, err := other.TryLock(context.Background()); err != nil {
		t.Fatalf("the lock is not free once every waiter is done: %v", err)
	}
	if err := other.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys := mutexKeys(DefaultPrefix, name)
	if n, err := c.Exists(context.Background(), keys[2:5]...).Result(); err != nil || n != 0 {
		t.Errorf("%d of the line's keys left (%v)", n, err)
	}
}

// A waiter next in line is cancelled while the holder releases, at random
// offsets around the release: either it holds (and unlocks) or its Lock
// fails with nothing held, and in both cases the waiter behind it is
// handed the lock at once, not at its next check-in or when a leaked
// lease runs out (both 10 s and more away).
func TestCancelNextInLine(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	url := s.URL("ttl=30s")
	const name = "cancel-next"
	keys := mutexKeys(DefaultPrefix, name)
	holder := mutex(t, open(t, url), name)
	next := mutex(t, open(t, url), name)
	behind := mutex(t, open(t, url), name)
	bg := context.Background()
	queued := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); c.ZCard(bg, keys[3]).Val() != n; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters never queued", n)
			}
		}
	}
	var outcomes [2]int
	for i := range 40 {
		if _, err := holder.Lock(bg); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		nextDone := make(chan error, 1)
		go func() {
			_, err := next.Lock(ctx)
			nextDone <- err
		}()
		queued(1)
		behindDone := make(chan error, 1)
		go func() {
			_, err := behind.Lock(bg)
			behindDone <- err
		}()
		queued(2)
		// Even rounds cancel a moment after the release starts, odd ones
		// release a moment after the cancel.
		d := time.Duration(rand.IntN(600)) * time.Microsecond
		unlocked := make(chan error, 1)
		go func() {
			if i%2 == 1 {
				time.Sleep(d)
			}
			unlocked <- holder.Unlock(bg)
		}()
		if i%2 == 0 {
			time.Sleep(d)
		}
		cancel()
		if err := <-unlocked; err != nil {
			t.Fatal(err)
		}
		err := <-nextDone
		switch {
		case err == nil:
			outcomes[0]++
			if err := next.Unlock(bg); err != nil {
				t.Fatal(err)
			}
		case errors.Is(err, context.Canceled):
			outcomes[1]++
		default:
			t.Fatalf("round %d: next in line: %v", i, err)
		}
		select {
		case err := <-behindDone:
			if err != nil {
				t.Fatalf("round %d: behind: %v", i, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: the waiter behind a cancelled one still waits 2s after the release", i)
		}
		if err := behind.Unlock(bg); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("next in line held %d times, was cancelled %d times", outcomes[0], outcomes[1])
	if outcomes[1] == 0 {
		t.Error("no round cancelled the waiter next in line")
	}
}

// A waiter that died while next in line (its entry expired, nobody
// cancelled it) is passed over by the release: the live waiter behind it
// is handed the lock at once rather than after a lease given to the dead.
func TestDeadNextInLineSkipped(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	url := s.URL("ttl=30s")
	const name = "dead-next"
	keys := append(mutexKeys(DefaultPrefix, name), DefaultPrefix+"alive")
	holder := mutex(t, open(t, url), name)
	waiter := mutex(t, open(t, url), name)
	bg := context.Background()
	for i := range 5 {
		if _, err := holder.Lock(bg); err != nil {
			t.Fatal(err)
		}
		// The entry a client that died at once would leave: 200 ms.
		if err := scriptMutexAcquire.Run(bg, c, keys, "ghost", 200, "1 h", 0, "nobody").Err(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(bg)
			done <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); c.ZCard(bg, keys[3]).Val() != 2; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the waiter never queued")
			}
		}
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now()
		if err := holder.Unlock(bg); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Second):
			t.Fatalf("round %d: the live waiter behind a dead one still waits 1s after the release", i)
		}
		if d := time.Since(t0); d > 100*time.Millisecond {
			t.Errorf("round %d: handed over %v after the release", i, d)
		}
		if err := waiter.Unlock(bg); err != nil {
			t.Fatal(err)
		}
	}
}
