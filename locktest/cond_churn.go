package locktest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// testCondChurn: goroutines sharing one Cond handle and one Mutex handle
// meet in rounds, as in the benchmarks of sync.Cond: each arrival but the
// last waits, and the last wakes the others with one Signal each. Every
// Signal then has a registered waiter to wake, so a round can only stall
// if a wake-up was lost. Then producers hand items to consumers on the
// same handles (condProduceConsume), the backend must show no waiter left,
// a single new waiter must be woken by one Signal, and many waiters must
// all be woken by one Broadcast.
func testCondChurn(t *testing.T, e *env) {
	b := e.open(t)
	// A context that can end makes each Wait set up its cancellation too.
	ctx := t.Context()
	name := e.name(t)
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	c, err := b.Cond(ctx, name)
	ok(t, "Cond", err)

	const workers = 16
	rounds, items := 300, 1500 // items: per producer
	if e.s.Caps.Lease {
		rounds, items = 8, 15 // every Wait and Signal is a round trip
	}
	var (
		arrived, gen int // guarded by m
		stop         bool
		done         int
		waitErr      firstError
	)
	fail := waitErr.set
	finished := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			defer func() {
				m.Lock(ctx)
				done++
				m.Unlock(ctx)
			}()
			for r := 0; r < rounds; r++ {
				if _, err := m.Lock(ctx); err != nil {
					fail(err)
					return
				}
				if arrived++; arrived == workers {
					arrived = 0
					gen++
					for i := 0; i < workers-1; i++ {
						if err := c.Signal(ctx); err != nil {
							fail(err)
						}
					}
				} else {
					// The predicate only guards against spurious wake-ups.
					for my := gen; gen == my && !stop; {
						if err := c.Wait(ctx, m); err != nil {
							fail(err)
							stop = true // the others would wait for a round that never ends
							c.Broadcast(ctx)
						}
					}
				}
				quit := stop
				if err := m.Unlock(ctx); err != nil {
					fail(err)
					return
				}
				if quit {
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(finished) }()
	unstick(t, m, c, finished, func() string {
		stop = true
		return fmt.Sprintf("%d of %d goroutines finished in 30 s, at round %d of %d: a wake-up was lost (first error: %v)", done, workers, gen, rounds, waitErr.get())
	})
	if err := waitErr.get(); err != nil {
		t.Fatalf("churn: %v", err)
	}
	if gen != rounds {
		t.Fatalf("%d rounds of %d", gen, rounds)
	}
	condProduceConsume(t, ctx, m, c, workers, items)
	checkNoWaiters(t, ctx, b, name)
	condSignalOne(t, ctx, m, c)
	checkNoWaiters(t, ctx, b, name)
	condBroadcastMany(t, ctx, m, c, 320)
	checkNoWaiters(t, ctx, b, name)
}

// checkNoWaiters: when the backend can be inspected, it reports no waiter
// for the Cond called name while none waits.
func checkNoWaiters(t *testing.T, ctx context.Context, b baton.Backend, name string) {
	t.Helper()
	in, isIn := b.(baton.Inspector)
	if !isIn {
		return
	}
	info, err := in.Inspect(ctx, baton.KindCond, name)
	if errors.Is(err, fs.ErrNotExist) {
		return // a backend may keep nothing for a Cond nobody waits on
	}
	ok(t, "Inspect", err)
	if info.Waiters > 0 {
		t.Fatalf("Inspect reports %d waiters with none waiting", info.Waiters)
	}
}

// condSignalOne: one waiter, known to be registered (it has the lock given
// back inside Wait), is woken by one Signal.
func condSignalOne(t *testing.T, ctx context.Context, m baton.Mutex, c baton.Cond) {
	t.Helper()
	var entered, ready bool // guarded by m
	done := make(chan error, 1)
	go func() {
		if _, err := m.Lock(ctx); err != nil {
			done <- err
			return
		}
		entered = true
		for !ready {
			if err := c.Wait(ctx, m); err != nil {
				m.Unlock(ctx)
				done <- err
				return
			}
		}
		done <- m.Unlock(ctx)
	}()
	for {
		_, err := m.Lock(ctx)
		ok(t, "Lock", err)
		if entered { // so the waiter is in Wait: it registers before it unlocks
			ready = true
			ok(t, "Signal", c.Signal(ctx))
			ok(t, "Unlock", m.Unlock(ctx))
			break
		}
		ok(t, "Unlock", m.Unlock(ctx))
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		ok(t, "waiter", err)
	case <-time.After(5 * time.Second):
		ok(t, "Broadcast", c.Broadcast(ctx))
		<-done
		t.Fatal("one Signal did not wake the only waiter in 5 s")
	}
}

// condBroadcastMany: n goroutines wait for one Broadcast; all are woken.
func condBroadcastMany(t *testing.T, ctx context.Context, m baton.Mutex, c baton.Cond, n int) {
	t.Helper()
	var (
		waiting, woken int // guarded by m
		released       bool
		errMu          sync.Mutex
		errs           []error
		wg             sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		wg.Go(func() {
			if _, err := m.Lock(ctx); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
				return
			}
			waiting++
			for !released {
				if err := c.Wait(ctx, m); err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					break
				}
			}
			woken++
			m.Unlock(ctx)
		})
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := m.Lock(ctx)
		ok(t, "Lock", err)
		if waiting == n || time.Now().After(deadline) {
			break // every waiter registered before it gave the lock back
		}
		ok(t, "Unlock", m.Unlock(ctx))
		time.Sleep(2 * time.Millisecond)
	}
	registered := waiting
	released = true
	ok(t, "Broadcast", c.Broadcast(ctx))
	ok(t, "Unlock", m.Unlock(ctx))
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		// Keep broadcasting so the test ends; it has failed already.
		for {
			c.Broadcast(ctx)
			select {
			case <-all:
			case <-time.After(100 * time.Millisecond):
				continue
			}
			break
		}
		t.Fatalf("one Broadcast woke %d of %d waiters in 30 s", woken, n) // all have left: no race
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d waiters failed, the first with %v", len(errs), n, errs[0])
	}
	if registered != n {
		t.Fatalf("only %d of %d goroutines reached Wait in 30 s", registered, n)
	}
}

// condProduceConsume: half of n goroutines produce items, each signalling
// after it unlocks, which lets wake-ups race with new registrations; the
// other half consume them, waiting while there is none. A consumer left
// waiting with items available means a lost wake-up.
func condProduceConsume(t *testing.T, ctx context.Context, m baton.Mutex, c baton.Cond, n, per int) {
	t.Helper()
	var (
		items, consumed int // guarded by m
		stop            bool
		firstErr        firstError
		wg              sync.WaitGroup
	)
	fail := firstErr.set
	for w := 0; w < n; w++ {
		wg.Go(func() {
			for i := 0; i < per; i++ {
				if _, err := m.Lock(ctx); err != nil {
					fail(err)
					return
				}
				if w%2 == 0 {
					items++
					m.Unlock(ctx)
					if err := c.Signal(ctx); err != nil {
						fail(err)
					}
					continue
				}
				for items == 0 && !stop {
					if err := c.Wait(ctx, m); err != nil {
						fail(err)
						stop = true
						c.Broadcast(ctx)
					}
				}
				quit := stop
				if !quit {
					items--
					consumed++
				}
				m.Unlock(ctx)
				if quit {
					return
				}
			}
		})
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	unstick(t, m, c, all, func() string {
		stop = true
		return fmt.Sprintf("consumers took %d of %d items in 30 s, %d left unconsumed: a wake-up was lost (first error: %v)", consumed, n/2*per, items, firstErr.get())
	})
	if err := firstErr.get(); err != nil {
		t.Fatalf("produce/consume: %v", err)
	}
	if items != 0 || consumed != n/2*per {
		t.Fatalf("consumed %d of %d items, %d left", consumed, n/2*per, items)
	}
}

// unstick returns once finished is closed. If that takes more than 30 s, a
// wake-up was lost: it takes m, calls stop (which tells the goroutines to
// stop and says what it saw, both under m), wakes every waiter (closing c
// for any Broadcast does not reach) and fails with stop's words once the
// goroutines have left.
func unstick(t *testing.T, m baton.Mutex, c baton.Cond, finished <-chan struct{}, stop func() string) {
	t.Helper()
	select {
	case <-finished:
		return
	case <-time.After(30 * time.Second):
	}
	ctx := t.Context()
	_, err := m.Lock(ctx)
	ok(t, "Lock", err)
	msg := stop()
	ok(t, "Broadcast", c.Broadcast(ctx))
	ok(t, "Unlock", m.Unlock(ctx))
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		c.Close()
		<-finished
	}
	t.Fatal(msg)
}

// firstError keeps the first error set, for goroutines that fail while
// another reads what they saw.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
