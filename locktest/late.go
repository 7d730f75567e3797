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

	for i := range e.cancelRounds() {
		_, err := holder.Acquire(ctx, 1)
		ok(t, "Acquire 1", err)
		wctx, cancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() {
			_, err := waiter.Acquire(wctx, 2)
			res <- err
		}()
		time.Sleep(time.Duration(i%5) * 200 * time.Microsecond)
		cancel()
		ok(t, "Release 1", holder.Release(ctx, 1))
		select {
		case err = <-res:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: cancelled Acquire(2) did not return", i)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Acquire(2) cancelled before the Release that freed the permits returned %v, want context.Canceled", i, err)
		}
		if err := waiter.Release(ctx, 1); !errors.Is(err, baton.ErrNotHeld) {
			t.Fatalf("round %d: the cancelled waiter holds permits (Release 1: %v)", i, err)
		}
		if err := soon(func() error { _, err := check.TryAcquire(ctx, 2); return err }); err != nil {
			t.Fatalf("round %d: permits not all back after the cancelled Acquire: TryAcquire 2: %v", i, err)
		}
		ok(t, "Release 2", check.Release(ctx, 2))
	}
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

	for i := range e.cancelRounds() {
		_, err := holder.Lock(ctx)
		ok(t, "Lock", err)
		wctx, cancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(wctx)
			res <- err
		}()
		time.Sleep(time.Duration(i%5) * 200 * time.Microsecond)
		cancel()
		ok(t, "Unlock", holder.Unlock(ctx))
		select {
		case err = <-res:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: cancelled Lock did not return", i)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Lock cancelled before the Unlock that freed the lock returned %v, want context.Canceled", i, err)
		}
		if err := waiter.Unlock(ctx); !errors.Is(err, baton.ErrNotHeld) {
			t.Fatalf("round %d: the cancelled waiter holds the lock (Unlock: %v)", i, err)
		}
		if err := soon(func() error { _, err := check.TryLock(ctx); return err }); err != nil {
			t.Fatalf("round %d: lock not free after the cancelled Lock: TryLock: %v", i, err)
		}
		ok(t, "Unlock", check.Unlock(ctx))
	}
}
