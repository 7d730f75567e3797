package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Mutex tests: basics, reentrancy, goroutines sharing a handle,
// cancellation, fencing and Close.

// twoMutexes opens the backend of a test and two handles of one Mutex
// name of its own on it.
func (e *env) twoMutexes(t *testing.T) (ctx context.Context, name string, m1, m2 baton.Mutex) {
	t.Helper()
	b, ctx, name := e.start(t)
	m1, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	m2, err = b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	return ctx, name, m1, m2
}

func testMutexBasics(t *testing.T, e *env) {
	ctx, name, m1, m2 := e.twoMutexes(t)
	if m1.Name() != name {
		t.Errorf("Name() = %q, want %q", m1.Name(), name)
	}
	is(t, "Unlock of a never-locked mutex", m1.Unlock(ctx), baton.ErrNotHeld)
	h, err := m1.Lock(ctx)
	ok(t, "Lock", err)
	if h.Token() == 0 || h.Mode() != baton.Exclusive || h.Err() != nil {
		t.Errorf("hold: token %d mode %v err %v; want token > 0, exclusive, no error", h.Token(), h.Mode(), h.Err())
	}
	_, err = m2.TryLock(ctx)
	is(t, "TryLock by another handle", err, baton.ErrLocked)
	_, err = m1.TryLock(ctx)
	is(t, "TryLock on the holding handle without owner", err, baton.ErrLocked)
	is(t, "Unlock by a handle that does not hold", m2.Unlock(ctx), baton.ErrNotHeld)
	ok(t, "Unlock", m1.Unlock(ctx))
	is(t, "double Unlock", m1.Unlock(ctx), baton.ErrNotHeld)
	h2, err := m2.TryLock(ctx)
	ok(t, "TryLock after Unlock", err)
	if h2.Token() <= h.Token() {
		t.Errorf("token %d after %d", h2.Token(), h.Token())
	}
	ok(t, "Unlock", m2.Unlock(ctx))
}

func testReentrancy(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	m, err := b.Mutex(ctx, e.name(t))
	ok(t, "Mutex", err)
	o1, o2 := baton.WithOwner(ctx), baton.WithOwner(ctx)
	h1, err := m.Lock(o1)
	ok(t, "Lock o1", err)
	for i := 0; i < 2; i++ {
		h, err := m.Lock(o1)
		ok(t, "reentrant Lock", err)
		if h.Token() != h1.Token() {
			t.Errorf("reentrant token %d, want the outer %d", h.Token(), h1.Token())
		}
	}
	_, err = m.TryLock(baton.WithOwner(o2))
	is(t, "TryLock by another owner", err, baton.ErrLocked)
	tctx, cancel := context.WithTimeout(o2, 30*time.Millisecond)
	_, err = m.Lock(tctx)
	cancel()
	is(t, "Lock by another owner", err, context.DeadlineExceeded)
	is(t, "Unlock by another owner", m.Unlock(o2), baton.ErrNotHeld)
	is(t, "Unlock without owner", m.Unlock(ctx), baton.ErrNotHeld)
	for i := 0; i < 3; i++ {
		ok(t, "Unlock o1", m.Unlock(o1))
	}
	is(t, "Unlock past the hold count", m.Unlock(o1), baton.ErrNotHeld)

	// The owner locks again while another goroutine of the same handle
	// waits for the lock: the relock counts, the unlocks release, and the
	// waiter gets the lock after the last one.
	_, err = m.Lock(o1)
	ok(t, "Lock o1", err)
	waited := make(chan error, 1)
	go func() {
		_, err := m.Lock(ctx)
		waited <- err
	}()
	time.Sleep(30 * time.Millisecond)
	_, err = m.Lock(o1)
	ok(t, "reentrant Lock with a goroutine waiting", err)
	ok(t, "Unlock o1", m.Unlock(o1))
	select {
	case err := <-waited:
		t.Fatalf("waiter got the lock while the owner still held it once: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- m.Unlock(o1) }()
	err = result(t, unlocked, 5*time.Second, "the owner's last Unlock hangs while another goroutine waits")
	ok(t, "last Unlock o1", err)
	err = result(t, waited, 5*time.Second, "waiter did not get the lock after the owner's last Unlock")
	ok(t, "waiter after the owner's last Unlock", err)
	ok(t, "Unlock", m.Unlock(ctx))

	// Without an owner a second Lock waits, like sync.Mutex.
	_, err = m.Lock(ctx)
	ok(t, "Lock", err)
	tctx, cancel = context.WithTimeout(ctx, 30*time.Millisecond)
	_, err = m.Lock(tctx)
	cancel()
	is(t, "second Lock without owner", err, context.DeadlineExceeded)
	ok(t, "Unlock", m.Unlock(ctx))
}

func testSharedHandle(t *testing.T, e *env) {
	ctx, _, m, other := e.twoMutexes(t)
	const workers, iters = 6, 60
	var (
		plain  int // guarded by the lock itself: the race detector checks the core's ordering
		inside atomic.Int32
		wg     sync.WaitGroup
		bad    atomic.Int32
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := m
			if w%3 == 2 {
				mine = other
			}
			for i := 0; i < iters; i++ {
				if _, err := mine.Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					bad.Add(1)
				}
				if mine == m {
					plain++
				}
				inside.Add(-1)
				if err := mine.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d overlapping holds among goroutines", bad.Load())
	}
	if want := workers * 2 / 3 * iters; plain != want {
		t.Errorf("counter %d, want %d", plain, want)
	}
}

func testCancel(t *testing.T, e *env) {
	ctx, _, m1, m2 := e.twoMutexes(t)
	_, err := m1.Lock(ctx)
	ok(t, "Lock", err)
	for _, same := range []bool{false, true} {
		waiter := m2
		if same {
			waiter = m1 // queued in the core behind its own handle's holder
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := waiter.Lock(cctx); done <- err }()
		time.Sleep(30 * time.Millisecond)
		t0 := time.Now()
		cancel()
		select {
		case err := <-done:
			if d := time.Since(t0); d > e.s.Caps.CancelBound {
				t.Errorf("cancelled waiter (same handle %v) returned after %v, bound %v", same, d, e.s.Caps.CancelBound)
			}
			is(t, "cancelled Lock", err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Fatalf("cancelled waiter (same handle %v) did not return", same)
		}
	}
	ok(t, "Unlock", m1.Unlock(ctx))
	// The cancelled waiters hold nothing.
	_, err = m2.TryLock(ctx)
	ok(t, "TryLock after cancelled waiters", err)
	ok(t, "Unlock", m2.Unlock(ctx))
	// A context that is done already fails even on a free lock, and takes
	// nothing; context.TODO() is as good as Background.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m1.Lock(dead)
	is(t, "Lock with a done context", err, context.Canceled)
	_, err = m1.TryLock(dead)
	is(t, "TryLock with a done context", err, context.Canceled)
	_, err = m2.TryLock(context.TODO())
	ok(t, "TryLock(TODO) after Lock with a done context", err)
	ok(t, "Unlock(TODO)", m2.Unlock(context.TODO()))
}

func testFencing(t *testing.T, e *env) {
	ctx := context.Background()
	name := e.name(t)
	var last baton.Token
	for round := 0; round < 3; round++ {
		b := e.open(t)
		ms := make([]baton.Mutex, 2)
		for i := range ms {
			m, err := b.Mutex(ctx, name)
			ok(t, "Mutex", err)
			ms[i] = m
		}
		for i := 0; i < 10; i++ {
			m := ms[i%2]
			h, err := m.Lock(ctx)
			ok(t, "Lock", err)
			if h.Token() <= last {
				t.Fatalf("token %d after %d", h.Token(), last)
			}
			last = h.Token()
			ok(t, "Unlock", m.Unlock(ctx))
		}
		ok(t, "Close", b.Close())
	}
}

func testClose(t *testing.T, e *env) {
	ctx := context.Background()
	b, err := e.s.Open(e.cfg)
	ok(t, "open", err)
	name := e.name(t)
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	_, err = m.Lock(ctx)
	ok(t, "Lock", err)
	// Another handle of the name, unlocked or closed, leaves this hold alone.
	other, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	is(t, "Unlock of another handle", other.Unlock(ctx), baton.ErrNotHeld)
	ok(t, "Close another handle", other.Close())
	third, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	_, err = third.TryLock(ctx)
	is(t, "TryLock while held, after another handle closed", err, baton.ErrLocked)
	ok(t, "Close", third.Close())
	done := make(chan error, 1)
	go func() { _, err := m.Lock(ctx); done <- err }()
	time.Sleep(20 * time.Millisecond)
	ok(t, "Close handle", m.Close())
	err = result(t, done, 5*time.Second, "waiter of a closed handle did not return")
	is(t, "waiter of a closed handle", err, baton.ErrClosed)
	_, err = m.Lock(ctx)
	is(t, "Lock after Close", err, baton.ErrClosed)
	m2, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	_, err = m2.TryLock(ctx)
	ok(t, "TryLock after the holder's handle closed", err)
	ok(t, "Close backend", b.Close())
	_, err = m2.Lock(ctx)
	is(t, "Lock after backend Close", err, baton.ErrClosed)
	_, err = b.Mutex(ctx, name)
	is(t, "Mutex after backend Close", err, baton.ErrClosed)
	ok(t, "second Close", b.Close())
}

// testCloseWhileBusy closes a handle while its goroutines lock and unlock
// it: whatever each goroutine was doing, the lock must end up free, and
// every call after Close must fail with ErrClosed.
func testCloseWhileBusy(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		name := e.name(t)
		m, err := b.Mutex(ctx, name)
		ok(t, "Mutex", err)
		var wg sync.WaitGroup
		started := make(chan struct{}, 4)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if i == 1 {
						started <- struct{}{}
					}
					if _, err := m.Lock(ctx); err != nil {
						if !errors.Is(err, baton.ErrClosed) {
							t.Errorf("Lock: %v", err)
						}
						return
					}
					if err := m.Unlock(ctx); err != nil {
						if !errors.Is(err, baton.ErrClosed) {
							t.Errorf("Unlock: %v", err)
						}
						return
					}
				}
			}()
		}
		for w := 0; w < 4; w++ {
			<-started
		}
		ok(t, "Close", m.Close())
		wg.Wait()
		_, err = m.Lock(ctx)
		is(t, "Lock after Close", err, baton.ErrClosed)
		m2, err := b.Mutex(ctx, name)
		ok(t, "Mutex", err)
		// What the closed handle held or was queued for is given back
		// promptly: a lease backend deletes a cancelled waiter's queue entry
		// on the server, retrying in the background if the first try times
		// out on a loaded cluster, so allow it a little more than the bound
		// of a cancelled waiter. A lock that stays taken fails.
		deadline := time.Now().Add(e.s.Caps.CancelBound + 2*time.Second)
		for {
			_, err = m2.TryLock(ctx)
			if !errors.Is(err, baton.ErrLocked) || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		ok(t, fmt.Sprintf("round %d: TryLock after a busy handle closed", round), err)
		ok(t, "Unlock", m2.Unlock(ctx))
		ok(t, "Close", m2.Close())
	}
}
