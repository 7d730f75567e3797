package locktest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want an error matching %v", what, err, want)
	}
}

func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func testBadInput(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	var before []string
	if e.s.Objects != nil {
		var err error
		before, err = e.s.Objects(e.cfg)
		ok(t, "objects", err)
	}
	badNames := []string{
		"", "a\x00b", strings.Repeat("x", 10240), "../../etc/passwd", "/", "\xff\xfe",
		"a//b", ".", "..", "a/", "/a", "a\nb", "a/../b", "a/./b", "\x7f", "tab\there",
		strings.Repeat("é", baton.MaxNameLen),
	}
	for _, n := range badNames {
		_, err := b.Mutex(ctx, n)
		is(t, fmt.Sprintf("Mutex(%.20q)", n), err, baton.ErrInvalidName)
		_, err = b.RWMutex(ctx, n)
		is(t, fmt.Sprintf("RWMutex(%.20q)", n), err, baton.ErrInvalidName)
		_, err = b.Semaphore(ctx, n, 2)
		is(t, fmt.Sprintf("Semaphore(%.20q)", n), err, baton.ErrInvalidName)
		_, err = b.Cond(ctx, n)
		is(t, fmt.Sprintf("Cond(%.20q)", n), err, baton.ErrInvalidName)
	}
	var nilCtx context.Context
	good := e.name(t)
	_, err := b.Mutex(nilCtx, good)
	is(t, "Mutex(nil ctx)", err, baton.ErrInvalidArgument)
	for _, p := range []int64{0, -1, -1 << 62} {
		_, err = b.Semaphore(ctx, good, p)
		is(t, fmt.Sprintf("Semaphore(permits %d)", p), err, baton.ErrInvalidArgument)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.Mutex(cancelled, good)
	is(t, "Mutex(cancelled ctx)", err, context.Canceled)
	if e.s.Objects != nil {
		after, err := e.s.Objects(e.cfg)
		ok(t, "objects", err)
		if !slices.Equal(before, after) {
			t.Errorf("refused calls created objects: before %q, after %q", before, after)
		}
	}

	m, err := b.Mutex(ctx, good)
	ok(t, "Mutex", err)
	_, err = m.Lock(nilCtx)
	is(t, "Lock(nil)", err, baton.ErrInvalidArgument)
	is(t, "Unlock(nil)", m.Unlock(nilCtx), baton.ErrInvalidArgument)
	if e.s.Caps.Semaphore {
		s, err := b.Semaphore(ctx, e.name(t), 3)
		ok(t, "Semaphore", err)
		for _, n := range []int64{0, -2, 4} {
			_, err = s.Acquire(ctx, n)
			is(t, fmt.Sprintf("Acquire(%d)", n), err, baton.ErrInvalidArgument)
			_, err = s.TryAcquire(ctx, n)
			is(t, fmt.Sprintf("TryAcquire(%d)", n), err, baton.ErrInvalidArgument)
		}
		is(t, "Release(0)", s.Release(ctx, 0), baton.ErrInvalidArgument)
		is(t, "Release(1) unheld", s.Release(ctx, 1), baton.ErrNotHeld)
	}
	if e.s.Caps.Cond {
		c, err := b.Cond(ctx, e.name(t))
		ok(t, "Cond", err)
		is(t, "Wait(nil lock)", c.Wait(ctx, nil), baton.ErrInvalidArgument)
		is(t, "Wait(unheld lock)", c.Wait(ctx, m), baton.ErrNotHeld)
	}
}

func testMutexBasics(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	name := e.name(t)
	m1, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	m2, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
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
	select {
	case err := <-unlocked:
		ok(t, "last Unlock o1", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the owner's last Unlock hangs while another goroutine waits")
	}
	select {
	case err := <-waited:
		ok(t, "waiter after the owner's last Unlock", err)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not get the lock after the owner's last Unlock")
	}
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
	b := e.open(t)
	ctx := context.Background()
	name := e.name(t)
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	other, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
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
	b := e.open(t)
	ctx := context.Background()
	name := e.name(t)
	m1, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	m2, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	_, err = m1.Lock(ctx)
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
	select {
	case err := <-done:
		is(t, "waiter of a closed handle", err, baton.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter of a closed handle did not return")
	}
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

func testRWBasics(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	name := e.name(t)
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
	select {
	case err := <-wDone:
		ok(t, "waiting writer", err)
	case <-time.After(5 * time.Second):
		t.Fatal("waiting writer did not get the lock after the reader left")
	}
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
	b := e.open(t)
	ctx := context.Background()
	name := e.name(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		r, err := b.RWMutex(ctx, name)
		ok(t, "RWMutex", err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * time.Millisecond)
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
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(50 * time.Millisecond)
	w, err := b.RWMutex(ctx, name)
	ok(t, "RWMutex", err)
	for i := 0; i < 5; i++ {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		t0 := time.Now()
		_, err = w.Lock(wctx)
		cancel()
		if err != nil {
			t.Fatalf("writer starved by a stream of readers: %v after %v", err, time.Since(t0))
		}
		ok(t, "Unlock", w.Unlock(ctx))
		time.Sleep(10 * time.Millisecond)
	}
}

func testSemBasics(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	name := e.name(t)
	s, err := b.Semaphore(ctx, name, 3)
	ok(t, "Semaphore", err)
	if s.Capacity() != 3 || s.Name() != name {
		t.Errorf("Capacity %d Name %q", s.Capacity(), s.Name())
	}
	_, err = b.Semaphore(ctx, name, 4)
	is(t, "Semaphore with another capacity", err, baton.ErrMismatch)
	s2, err := b.Semaphore(ctx, name, 3)
	ok(t, "Semaphore", err)
	_, err = s.Acquire(ctx, 2)
	ok(t, "Acquire 2", err)
	_, err = s2.TryAcquire(ctx, 2)
	is(t, "TryAcquire 2 of 1 left", err, baton.ErrLocked)
	_, err = s2.TryAcquire(ctx, 1)
	ok(t, "TryAcquire 1", err)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s2.Acquire(tctx, 1)
	cancel()
	is(t, "Acquire on a full semaphore", err, context.DeadlineExceeded)
	is(t, "Release more than held", s2.Release(ctx, 2), baton.ErrNotHeld)
	ok(t, "Release 1", s2.Release(ctx, 1))
	ok(t, "Release 1 of 2", s.Release(ctx, 1))
	_, err = s2.TryAcquire(ctx, 2)
	ok(t, "TryAcquire 2 after releases", err)
	ok(t, "Release", s2.Release(ctx, 2))
	ok(t, "Release", s.Release(ctx, 1))
	is(t, "Release unheld", s.Release(ctx, 1), baton.ErrNotHeld)
	// A waiter is served when permits come back.
	_, err = s.Acquire(ctx, 3)
	ok(t, "Acquire 3", err)
	done := make(chan error, 1)
	go func() { _, err := s2.Acquire(ctx, 2); done <- err }()
	time.Sleep(20 * time.Millisecond)
	ok(t, "Release 3", s.Release(ctx, 3))
	select {
	case err := <-done:
		ok(t, "waiter", err)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not served after Release")
	}
	ok(t, "Release", s2.Release(ctx, 2))
}

func testCondBasics(t *testing.T, e *env) {
	b := e.open(t)
	ctx := context.Background()
	name := e.name(t)
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	c, err := b.Cond(ctx, name)
	ok(t, "Cond", err)

	// Signal wakes a waiter; the waiter returns holding the lock.
	var ready atomic.Bool
	done := make(chan error, 1)
	go func() {
		if _, err := m.Lock(ctx); err != nil {
			done <- err
			return
		}
		for !ready.Load() {
			if err := c.Wait(ctx, m); err != nil {
				done <- err
				return
			}
		}
		done <- m.Unlock(ctx)
	}()
	time.Sleep(30 * time.Millisecond)
	_, err = m.Lock(ctx)
	ok(t, "Lock", err)
	ready.Store(true)
	ok(t, "Signal", c.Signal(ctx))
	ok(t, "Unlock", m.Unlock(ctx))
	select {
	case err := <-done:
		ok(t, "waiter", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Signal did not wake the waiter")
	}

	// Broadcast wakes every waiter.
	const n = 3
	var woken atomic.Int32
	var gen atomic.Int32
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			if _, err := m.Lock(ctx); err != nil {
				errs <- err
				return
			}
			for gen.Load() == 0 {
				if err := c.Wait(ctx, m); err != nil {
					errs <- err
					return
				}
			}
			woken.Add(1)
			errs <- m.Unlock(ctx)
		}()
	}
	time.Sleep(50 * time.Millisecond)
	_, err = m.Lock(ctx)
	ok(t, "Lock", err)
	gen.Store(1)
	ok(t, "Broadcast", c.Broadcast(ctx))
	ok(t, "Unlock", m.Unlock(ctx))
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			ok(t, "broadcast waiter", err)
		case <-time.After(5 * time.Second):
			t.Fatalf("Broadcast woke %d of %d", woken.Load(), n)
		}
	}

	// A cancelled Wait returns the context's error, holding the lock.
	_, err = m.Lock(ctx)
	ok(t, "Lock", err)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = c.Wait(tctx, m)
	cancel()
	is(t, "cancelled Wait", err, context.DeadlineExceeded)
	_, err = m.TryLock(ctx)
	is(t, "TryLock after a cancelled Wait (the waiter holds)", err, baton.ErrLocked)
	ok(t, "Unlock after a cancelled Wait", m.Unlock(ctx))
}

func histPaths(dir string, n int) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = filepath.Join(dir, fmt.Sprintf("hist-%d", i))
	}
	return ps
}

func mergeHistories(t *testing.T, paths []string) []Rec {
	var all []Rec
	for _, p := range paths {
		recs, err := ReadHistory(p)
		ok(t, "read history", err)
		all = append(all, recs...)
	}
	return all
}

func testCrossProcessMutex(t *testing.T, e *env) {
	const procs, handles, goroutines = 4, 2, 2
	per := max(1, e.s.Caps.Acquisitions/(procs*handles*goroutines))
	dir := t.TempDir()
	name := e.name(t)
	counter := filepath.Join(dir, "counter")
	hs := histPaths(dir, procs)
	var ps []*proc
	for i := 0; i < procs; i++ {
		ps = append(ps, spawn(t, e, "locker", helperArgs{
			Name: name, Handles: handles, Goroutines: goroutines, Iterations: per,
			Counter: counter, History: hs[i],
		}))
	}
	for _, p := range ps {
		p.wait(t)
	}
	if t.Failed() {
		return
	}
	total := uint64(procs * handles * goroutines * per)
	got, err := readCounter(counter)
	ok(t, "counter", err)
	if got != total {
		t.Errorf("counter %d after %d acquisitions: %d lost updates", got, total, total-got)
	}
	recs := mergeHistories(t, hs)
	if uint64(len(recs)) != total {
		t.Errorf("%d records, want %d", len(recs), total)
	}
	for _, err := range Check(recs, 0) {
		t.Error(err)
	}
	t.Logf("%d acquisitions by %d processes × %d handles × %d goroutines", total, procs, handles, goroutines)
}

func testCrossProcessRW(t *testing.T, e *env) {
	const procs, handles, goroutines = 3, 2, 2
	per := max(1, e.s.Caps.Acquisitions/4/(procs*handles*goroutines))
	dir := t.TempDir()
	name := e.name(t)
	counter := filepath.Join(dir, "counter")
	hs := histPaths(dir, procs)
	var ps []*proc
	for i := 0; i < procs; i++ {
		ps = append(ps, spawn(t, e, "locker", helperArgs{
			Name: name, Handles: handles, Goroutines: goroutines, Iterations: per,
			Counter: counter, History: hs[i], ReadPercent: 80,
		}))
	}
	for _, p := range ps {
		p.wait(t)
	}
	if t.Failed() {
		return
	}
	recs := mergeHistories(t, hs)
	var writes, reads uint64
	for _, r := range recs {
		if r.Exclusive {
			writes++
		} else {
			reads++
		}
	}
	got, err := readCounter(counter)
	ok(t, "counter", err)
	if got != writes {
		t.Errorf("counter %d after %d writes", got, writes)
	}
	for _, err := range Check(recs, 0) {
		t.Error(err)
	}
	t.Logf("%d reads, %d writes across %d processes", reads, writes, procs)
}

func testCrossProcessSem(t *testing.T, e *env) {
	const procs, handles, goroutines, capacity = 4, 2, 1, 3
	per := max(1, e.s.Caps.Acquisitions/20/(procs*handles*goroutines))
	dir := t.TempDir()
	name := e.name(t)
	hs := histPaths(dir, procs)
	var ps []*proc
	for i := 0; i < procs; i++ {
		ps = append(ps, spawn(t, e, "sem", helperArgs{
			Name: name, Handles: handles, Goroutines: goroutines, Iterations: per,
			History: hs[i], Capacity: capacity, MaxN: capacity,
		}))
	}
	for _, p := range ps {
		p.wait(t)
	}
	if t.Failed() {
		return
	}
	recs := mergeHistories(t, hs)
	for _, err := range Check(recs, capacity) {
		t.Error(err)
	}
	// Every permit is back.
	b := e.open(t)
	s, err := b.Semaphore(context.Background(), name, capacity)
	ok(t, "Semaphore", err)
	_, err = s.TryAcquire(context.Background(), capacity)
	ok(t, "TryAcquire of every permit after the helpers exited", err)
	ok(t, "Release", s.Release(context.Background(), capacity))
}

func testKillHolder(t *testing.T, e *env) {
	ctx := context.Background()
	name := e.name(t)
	b := e.open(t)
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	var took []time.Duration
	for round := 0; round < 5; round++ {
		p := spawn(t, e, "hold", helperArgs{Name: name, Kind: "mutex"})
		p.expect(t, "held", 30*time.Second)
		got := make(chan error, 1)
		var at time.Time
		go func() {
			_, err := m.Lock(ctx)
			at = time.Now()
			got <- err
		}()
		time.Sleep(30 * time.Millisecond)
		t0 := time.Now()
		ok(t, "kill", p.cmd.Process.Kill())
		select {
		case err := <-got:
			ok(t, "Lock after the holder was killed", err)
		case <-time.After(e.s.Caps.KillBound + 30*time.Second):
			t.Fatal("waiter never got the lock of a killed holder")
		}
		_ = p.cmd.Wait()
		took = append(took, at.Sub(t0))
		ok(t, "Unlock", m.Unlock(ctx))
	}
	// The median, so that one scheduling stall of a loaded machine does not
	// decide; the worst is logged.
	slices.Sort(took)
	if med := took[len(took)/2]; med > e.s.Caps.KillBound {
		t.Errorf("holder SIGKILL -> waiter holds: median %v of %v, bound %v", med, took, e.s.Caps.KillBound)
	}
	t.Logf("holder SIGKILL -> waiter holds: median %v, worst %v of %d", took[len(took)/2], took[len(took)-1], len(took))
}
