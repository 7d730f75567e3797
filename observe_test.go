package baton_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// tally counts events by type and checks what every event must satisfy.
type tally struct {
	t       *testing.T
	n       [8]atomic.Int64 // by EventType
	held    atomic.Int64    // sum of Held, ns
	classes sync.Map        // ErrorClass -> *atomic.Int64
}

func (c *tally) Observe(e baton.Event) {
	c.n[e.Type].Add(1)
	c.held.Add(int64(e.Held))
	if e.Backend != "local" || e.Name == "" || e.Op == "" || e.Wait < 0 || e.Held < 0 {
		c.t.Errorf("malformed event %+v", e)
	}
	if (e.Type == baton.EventFailed || e.Type == baton.EventError || e.Type == baton.EventLost) != (e.Err != nil) {
		c.t.Errorf("event %v with error %v", e.Type, e.Err)
	}
	if e.Type == baton.EventError {
		v, _ := c.classes.LoadOrStore(baton.ErrorClass(e.Err), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
}

func (c *tally) get(t baton.EventType) int64 { return c.n[t].Load() }

func (c *tally) class(name string) int64 {
	if v, ok := c.classes.Load(name); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func observed(t *testing.T) (baton.Backend, *tally) {
	t.Helper()
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c := &tally{t: t}
	if err := baton.Observe(b, c); err != nil {
		t.Fatal(err)
	}
	return b, c
}

// TestObserveHammer: goroutines on two handles of one local Mutex, some
// with contexts that end while they wait. Every acquisition is reported
// once as started and once as ended, the grants and the releases match the
// callers' own counts, and hold times add up.
func TestObserveHammer(t *testing.T) {
	b, c := observed(t)
	ctx := context.Background()
	var ms [2]baton.Mutex
	for i := range ms {
		m, err := b.Mutex(ctx, "hammer")
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			m := ms[g%2]
			for range 200 {
				lctx, cancel := ctx, context.CancelFunc(func() {})
				if rand.IntN(4) == 0 {
					lctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(200))*time.Microsecond)
				}
				_, err := m.Lock(lctx)
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				ok.Add(1)
				time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := c.get(baton.EventAcquire); got != ok.Load()+failed.Load() {
		t.Errorf("%d EventAcquire, want %d", got, ok.Load()+failed.Load())
	}
	if got := c.get(baton.EventAcquired); got != ok.Load() {
		t.Errorf("%d EventAcquired, want %d", got, ok.Load())
	}
	if got := c.get(baton.EventFailed); got != failed.Load() {
		t.Errorf("%d EventFailed, want %d", got, failed.Load())
	}
	if got := c.get(baton.EventReleased); got != ok.Load() {
		t.Errorf("%d EventReleased, want %d", got, ok.Load())
	}
	if got := c.class("deadline"); got != failed.Load() {
		t.Errorf("%d errors of class deadline, want %d", got, failed.Load())
	}
	if c.held.Load() <= 0 {
		t.Error("no hold time reported")
	}
}

// TestObservePrimitives: RWMutex, Semaphore and Cond report their
// acquisitions and releases; a TryLock refused and an Unlock of what is not
// held are errors of their class; a detached observer hears nothing.
func TestObservePrimitives(t *testing.T) {
	b, c := observed(t)
	ctx := context.Background()
	rw, err := b.RWMutex(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := rw.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rw.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock under readers: %v", err)
	}
	for range 3 {
		if err := rw.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rw.RUnlock(ctx); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("RUnlock of nothing: %v", err)
	}
	if _, err := rw.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := b.Semaphore(ctx, "s", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctx, 2); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryAcquire past capacity: %v", err)
	}
	if err := s.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	m, err := b.Mutex(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	cv, err := b.Cond(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if err := cv.Wait(wctx, m); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v", err)
	}
	cancel()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// 3 RLock, TryLock, Lock; Acquire, TryAcquire; Lock, Wait, the
	// Wait's relock.
	want := map[baton.EventType]int64{
		baton.EventAcquire: 10, baton.EventAcquired: 7, baton.EventFailed: 3,
		// 3+1 RUnlock, Release, the Wait's Unlock and the last one.
		baton.EventReleased: 7,
	}
	for typ, n := range want {
		if got := c.get(typ); got != n {
			t.Errorf("%d %v events, want %d", got, typ, n)
		}
	}
	if c.class("locked") != 2 || c.class("not_held") != 1 || c.class("deadline") != 1 {
		t.Errorf("errors: locked %d, not_held %d, deadline %d; want 2, 1, 1", c.class("locked"), c.class("not_held"), c.class("deadline"))
	}
	if err := baton.Observe(b, nil); err != nil {
		t.Fatal(err)
	}
	before := c.get(baton.EventAcquire)
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if c.get(baton.EventAcquire) != before {
		t.Error("a detached observer still hears events")
	}
}

// TestObserveNoAlloc: an uncontended Lock+Unlock of the futex Mutex
// allocates nothing, with or without an observer that keeps no event.
func TestObserveNoAlloc(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	m, err := b.Mutex(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	run := func() {
		if _, err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("unobserved: %v allocations per Lock+Unlock", n)
	}
	if err := baton.Observe(b, &tally{t: t}); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("observed: %v allocations per Lock+Unlock", n)
	}
}

// TestObserveToggle: attaching and detaching an observer while goroutines
// lock, read-lock and acquire leaves every primitive working: no hold is
// lost track of between the observed and the unobserved paths.
func TestObserveToggle(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	m, err := b.Mutex(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	rw, err := b.RWMutex(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Semaphore(ctx, "s", 2)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var toggler sync.WaitGroup
	toggler.Go(func() {
		c := &tally{t: t}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var o baton.Observer
			if i%2 == 0 {
				o = c
			}
			if err := baton.Observe(b, o); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	var inside atomic.Int32
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for range 300 {
				switch g % 3 {
				case 0:
					if _, err := m.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					if inside.Add(1) != 1 {
						t.Error("two holders of the Mutex")
					}
					inside.Add(-1)
					if err := m.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				case 1:
					if _, err := rw.RLock(ctx); err != nil {
						t.Error(err)
						return
					}
					if err := rw.RUnlock(ctx); err != nil {
						t.Error(err)
						return
					}
				case 2:
					if _, err := s.Acquire(ctx, 1); err != nil {
						t.Error(err)
						return
					}
					if err := s.Release(ctx, 1); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	toggler.Wait()
	if _, err := m.TryLock(ctx); err != nil {
		t.Errorf("the Mutex after the toggling: %v", err)
	}
	if _, err := rw.TryLock(ctx); err != nil {
		t.Errorf("the RWMutex after the toggling: %v", err)
	}
	if _, err := s.TryAcquire(ctx, 2); err != nil {
		t.Errorf("the Semaphore after the toggling: %v", err)
	}
}
