package locktest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// RWMutex tests: readers and writers, writer preference.

func testRWBasics(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	r1, err := b.RWMutex(ctx, name)
	ok(t, "RWMutex", err)
	r2, err := b.RWMutex(ctx, name)
	ok(t, "RWMutex", err)
	r3, err := b.RWMutex(ctx, name)
	ok(t, "RWMutex", err)

	_, err = r1.RLock(ctx)
	ok(t, "RLock", err)
	_, err = r2.RLock(ctx)
	ok(t, "second reader", err)
	_, err = r3.TryLock(ctx)
	is(t, "TryLock beside readers", err, baton.ErrLocked)
	ok(t, "RUnlock", r1.RUnlock(ctx))
	ok(t, "RUnlock", r2.RUnlock(ctx))
	is(t, "RUnlock unheld", r2.RUnlock(ctx), baton.ErrNotHeld)

	h, err := r1.Lock(ctx)
	ok(t, "Lock", err)
	_, err = r2.TryRLock(ctx)
	is(t, "TryRLock beside a writer", err, baton.ErrLocked)
	_, err = r2.TryLock(ctx)
	is(t, "TryLock beside a writer", err, baton.ErrLocked)

	// Downgrade with a writer waiting: the writer must not get in until the
	// downgraded reader leaves.
	var wIn atomic.Bool
	wDone := make(chan error, 1)
	go func() {
		_, err := r3.Lock(ctx)
		wIn.Store(true)
		wDone <- err
	}()
	time.Sleep(30 * time.Millisecond)
	dh, err := r1.Downgrade(ctx)
	ok(t, "Downgrade", err)
	if dh.Token() != h.Token() || dh.Mode() != baton.Shared {
		t.Errorf("downgraded hold: token %d mode %v, want %d shared", dh.Token(), dh.Mode(), h.Token())
	}
	time.Sleep(30 * time.Millisecond)
	if wIn.Load() {
		t.Fatal("a waiting writer got in after Downgrade while the reader still held")
	}
	is(t, "Unlock after Downgrade", r1.Unlock(ctx), baton.ErrNotHeld)
	ok(t, "RUnlock after Downgrade", r1.RUnlock(ctx))
	err = result(t, wDone, 5*time.Second, "waiting writer did not get the lock after the reader left")
	ok(t, "waiting writer", err)
	ok(t, "Unlock", r3.Unlock(ctx))

	_, err = r1.Downgrade(ctx)
	is(t, "Downgrade unheld", err, baton.ErrNotHeld)

	// Upgrade is refused, not deadlocked.
	o := baton.WithOwner(ctx)
	_, err = r1.RLock(o)
	ok(t, "RLock owner", err)
	_, err = r1.Lock(o)
	is(t, "read-to-write upgrade", err, baton.ErrUpgrade)
	ok(t, "RUnlock owner", r1.RUnlock(o))

	// Without an owner the handle cannot tell the reader from another
	// caller: Lock waits, as sync.RWMutex's does, until its context ends.
	_, err = r1.RLock(ctx)
	ok(t, "RLock without owner", err)
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = r1.Lock(wctx)
	wcancel()
	is(t, "Lock over the handle's own read lock, without owner", err, context.DeadlineExceeded)
	ok(t, "RUnlock without owner", r1.RUnlock(ctx))

	// A writer may read; unlocking the write keeps the read, atomically.
	_, err = r1.Lock(o)
	ok(t, "Lock owner", err)
	_, err = r1.RLock(o)
	ok(t, "RLock under own write lock", err)
	_, err = r2.TryRLock(ctx)
	is(t, "TryRLock beside the writer", err, baton.ErrLocked)
	ok(t, "Unlock owner", r1.Unlock(o))
	_, err = r2.TryLock(ctx)
	is(t, "TryLock while the owner still reads", err, baton.ErrLocked)
	ok(t, "RUnlock owner", r1.RUnlock(o))
	_, err = r2.TryLock(ctx)
	ok(t, "TryLock after all left", err)
	ok(t, "Unlock", r2.Unlock(ctx))

	// Reentrant readers pass a waiting writer instead of deadlocking.
	_, err = r1.RLock(o)
	ok(t, "RLock owner", err)
	go func() {
		_, err := r2.Lock(ctx)
		wDone <- err
	}()
	time.Sleep(20 * time.Millisecond)
	rctx, cancel := context.WithTimeout(o, 2*time.Second)
	_, err = r1.RLock(rctx)
	cancel()
	ok(t, "reentrant RLock with a writer waiting", err)
	ok(t, "RUnlock", r1.RUnlock(o))
	ok(t, "RUnlock", r1.RUnlock(o))
	ok(t, "writer after readers", <-wDone)
	ok(t, "Unlock", r2.Unlock(ctx))
}

func testRWWriterNotStarved(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		r, err := b.RWMutex(ctx, name)
		ok(t, "RWMutex", err)
		readAgain(t, r, stop, &wg, time.Duration(i)*time.Millisecond)
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(50 * time.Millisecond)
	w, err := b.RWMutex(ctx, name)
	ok(t, "RWMutex", err)
	for i := 0; i < 5; i++ {
		lockWithin(t, w, 3*time.Second, "writer starved by a stream of readers")
	}
}

// readAgain starts a reader that waits start, then takes and gives back r's
// read lock, holding it 3 ms each time, until stop is closed.
func readAgain(t *testing.T, r baton.RWMutex, stop <-chan struct{}, wg *sync.WaitGroup, start time.Duration) {
	ctx := context.Background()
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(start)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := r.RLock(ctx); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(3 * time.Millisecond)
			if err := r.RUnlock(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
}

// lockWithin takes and gives back w's write lock, failing the test with
// what when it takes longer than d, then pauses for the readers.
func lockWithin(t *testing.T, w baton.RWMutex, d time.Duration, what string) {
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, d)
	t0 := time.Now()
	_, err := w.Lock(wctx)
	cancel()
	if err != nil {
		t.Fatalf("%s: %v after %v", what, err, time.Since(t0))
	}
	ok(t, "Unlock", w.Unlock(ctx))
	time.Sleep(10 * time.Millisecond)
}

// start opens the backend of a test, with a context and a name of its own.
func (e *env) start(t *testing.T) (baton.Backend, context.Context, string) {
	t.Helper()
	b := e.open(t)
	return b, context.Background(), e.name(t)
}
