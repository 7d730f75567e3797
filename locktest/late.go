package locktest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Tests of what arrives late: readers that come after their handle's grant
// was taken, and cancellations that race the release which would have let a
// waiter in.

// cancelRounds is how many times the cancellation races are run.
func (e *env) cancelRounds() int {
	if e.s.Caps.Lease {
		return 40
	}
	return 200
}

// soon retries try while it fails with ErrLocked, for a few seconds: a
// backend may withdraw a cancelled waiter's entry after Acquire returned
// (etcd deletes the key of a cancelled write once the server answers).
func soon(try func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := try()
		if !errors.Is(err, baton.ErrLocked) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// testRWLateReaders: readers of one handle that arrive 10–20 ms apart, each
// holding until all are in, with no writer anywhere. With sync.RWMutex this
// is correct code; every reader must get in.
func testRWLateReaders(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	r, err := b.RWMutex(ctx, e.name(t))
	ok(t, "RWMutex", err)
	defer r.Close()
	const n = 6
	in := make(chan error, n)
	all := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * (10*time.Millisecond + rand.N(10*time.Millisecond)))
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			t0 := time.Now()
			_, err := r.RLock(rctx)
			if err != nil {
				in <- errors.Join(err, errors.New("after "+time.Since(t0).String()))
				return
			}
			in <- nil
			<-all // hold until every reader is in
			if err := r.RUnlock(ctx); err != nil {
				t.Errorf("RUnlock: %v", err)
			}
		}()
	}
	failed := false
	for range n {
		if err := <-in; err != nil {
			t.Errorf("a late reader with no writer anywhere did not get in: %v", err)
			failed = true
		}
	}
	if !failed {
		// Every reader holds, the last one for a while: a TryRLock after
		// the window must get in too.
		time.Sleep(15 * time.Millisecond)
		if _, err := r.TryRLock(ctx); err != nil {
			t.Errorf("TryRLock while only readers hold: %v", err)
		} else {
			ok(t, "RUnlock", r.RUnlock(ctx))
		}
	}
	close(all)
	wg.Wait()
	// Nothing is left held: a writer of another handle gets in at once.
	w, err := b.RWMutex(ctx, r.Name())
	ok(t, "RWMutex", err)
	defer w.Close()
	_, err = w.TryLock(ctx)
	ok(t, "TryLock after the readers left", err)
	ok(t, "Unlock", w.Unlock(ctx))
}

// testRWOneHandleStream: goroutines of one handle read in overlapping
// turns, so that the handle's shared grant never drains by itself; a writer
// of another handle, and of another process, must still get in.
func testRWOneHandleStream(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	r, err := b.RWMutex(ctx, name)
	ok(t, "RWMutex", err)
	defer r.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		readAgain(t, r, stop, &wg, time.Duration(i)*500*time.Microsecond)
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(30 * time.Millisecond)
	w, err := b.RWMutex(ctx, name)
	ok(t, "RWMutex", err)
	defer w.Close()
	for range 3 {
		lockWithin(t, w, 5*time.Second, "writer of another handle starved by the readers of one handle")
	}
	if !e.s.Caps.CrossProcess {
		return
	}
	p := spawn(t, e, "hold", helperArgs{Name: name, Kind: "rw", HoldFor: 20 * time.Millisecond})
	p.expect(t, "held", 10*time.Second)
	p.wait(t)
}

// testSemCancelRace: a waiter for 2 permits with 1 free is cancelled, and
// then the permit it waited for is released. The cancel came first, so the
// waiter must fail with context.Canceled and hold nothing.
func testSemCancelRace(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	var s [3]baton.Semaphore
	for i := range s {
		var err error
		s[i], err = b.Semaphore(ctx, name, 2)
		ok(t, "Semaphore", err)
		defer s[i].Close()
	}
	holder, waiter, check := s[0], s[1], s[2]

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := waiter.Acquire(done, 1)
	is(t, "Acquire with a done context", err, context.Canceled)
	_, err = waiter.TryAcquire(done, 1)
	is(t, "TryAcquire with a done context", err, context.Canceled)
	is(t, "Release after refused acquisitions", waiter.Release(ctx, 1), baton.ErrNotHeld)

	e.cancelRace(t, ctx, cancelRace{
		hold: call{"Acquire 1", func(ctx context.Context) error { _, err := holder.Acquire(ctx, 1); return err }},
		free: call{"Release 1", func(ctx context.Context) error { return holder.Release(ctx, 1) }},
		wait: call{"Acquire(2)", func(ctx context.Context) error { _, err := waiter.Acquire(ctx, 2); return err }},
		left: call{"Release 1", func(ctx context.Context) error { return waiter.Release(ctx, 1) }},
		take: call{"TryAcquire 2", func(ctx context.Context) error { _, err := check.TryAcquire(ctx, 2); return err }},
		give: call{"Release 2", func(ctx context.Context) error { return check.Release(ctx, 2) }},
	})
}

// testLockCancelRace is testSemCancelRace for a Mutex: a waiter cancelled
// before the holder's Unlock must fail with context.Canceled, holding
// nothing.
func testLockCancelRace(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	var m [3]baton.Mutex
	for i := range m {
		var err error
		m[i], err = b.Mutex(ctx, name)
		ok(t, "Mutex", err)
		defer m[i].Close()
	}
	holder, waiter, check := m[0], m[1], m[2]

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := waiter.Lock(done)
	is(t, "Lock with a done context", err, context.Canceled)

	e.cancelRace(t, ctx, cancelRace{
		hold: call{"Lock", func(ctx context.Context) error { _, err := holder.Lock(ctx); return err }},
		free: call{"Unlock", holder.Unlock},
		wait: call{"Lock", func(ctx context.Context) error { _, err := waiter.Lock(ctx); return err }},
		left: call{"Unlock", waiter.Unlock},
		take: call{"TryLock", func(ctx context.Context) error { _, err := check.TryLock(ctx); return err }},
		give: call{"Unlock", check.Unlock},
	})
}

// A call is one step of a cancellation race; what names it in messages.
type call struct {
	what string
	do   func(context.Context) error
}

// A cancelRace is the steps of testSemCancelRace or testLockCancelRace: the
// holder takes (hold) and gives back (free) what the waiter waits for
// (wait); the waiter's release (left) must then find nothing held, and
// another handle must take it all (take, tried again while it is refused)
// and give it back (give).
type cancelRace struct {
	hold, free, wait, left, take, give call
}

// cancelRace runs the rounds of r: in each, the waiter's context is
// cancelled before the release that would have let it in, so the wait must
// fail with context.Canceled and leave nothing held.
func (e *env) cancelRace(t *testing.T, ctx context.Context, r cancelRace) {
	t.Helper()
	for i := range e.cancelRounds() {
		ok(t, r.hold.what, r.hold.do(ctx))
		wctx, cancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() { res <- r.wait.do(wctx) }()
		time.Sleep(time.Duration(i%5) * 200 * time.Microsecond)
		cancel()
		ok(t, r.free.what, r.free.do(ctx))
		var err error
		select {
		case err = <-res:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: cancelled %s did not return", i, r.wait.what)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %s cancelled before the %s that let it in returned %v, want context.Canceled", i, r.wait.what, r.free.what, err)
		}
		if err := r.left.do(ctx); !errors.Is(err, baton.ErrNotHeld) {
			t.Fatalf("round %d: the cancelled waiter holds what it waited for (%s: %v)", i, r.left.what, err)
		}
		if err := soon(func() error { return r.take.do(ctx) }); err != nil {
			t.Fatalf("round %d: not all free after the cancelled %s: %s: %v", i, r.wait.what, r.take.what, err)
		}
		ok(t, r.give.what, r.give.do(ctx))
	}
}
