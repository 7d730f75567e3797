//go:build linux

package shmrw

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// Tests of the count path: anonymous readers through the core, counted in
// the handle's slot.

// callCounter is shmDriver whose RW drivers count their Acquire and
// TryAcquire calls.
type callCounter struct {
	shmDriver
	calls *atomic.Int64
}

type countedRW struct {
	*RW
	calls *atomic.Int64
}

func (c countedRW) Acquire(ctx context.Context, m driver.Mode) (driver.Grant, error) {
	c.calls.Add(1)
	return c.RW.Acquire(ctx, m)
}

func (c countedRW) TryAcquire(ctx context.Context, m driver.Mode) (driver.Grant, error) {
	c.calls.Add(1)
	return c.RW.TryAcquire(ctx, m)
}

func (d callCounter) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	l, err := Open(d.ns, name)
	if err != nil {
		return nil, err
	}
	return countedRW{l, d.calls}, nil
}

func coreBackend(t testing.TB, ns *ipc.Namespace) baton.Backend {
	b := baton.NewBackend(shmDriver{ns})
	t.Cleanup(func() { b.Close() })
	return b
}

func rwOf(t testing.TB, b baton.Backend, name string) baton.RWMutex {
	t.Helper()
	m, err := b.RWMutex(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An anonymous RLock+RUnlock nobody contends calls no driver method and
// allocates nothing; an owned one goes through the driver.
func TestCountedNoDriverCall(t *testing.T) {
	ns := newNS(t)
	var calls atomic.Int64
	b := baton.NewBackend(callCounter{shmDriver{ns}, &calls})
	defer b.Close()
	m := rwOf(t, b, "n")
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := m.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if n := calls.Load(); n != 0 || allocs != 0 {
		t.Fatalf("anonymous RLock+RUnlock: %d driver calls, %v allocations per pair", n, allocs)
	}
	if _, err := m.TryRLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("anonymous TryRLock: %d driver calls", n)
	}
	o := baton.WithOwner(ctx)
	if _, err := m.RLock(o); err != nil {
		t.Fatal(err)
	}
	if err := m.RUnlock(o); err != nil {
		t.Fatal(err)
	}
	if calls.Load() == 0 {
		t.Fatal("an owned reader did not go through the driver")
	}
}

// Counted readers and the rules around them: a writer of another handle
// or of the same handle waits for them, a waiting writer turns new ones
// away, RUnlock of what is not held fails, Close gives them back.
func TestCountedReaders(t *testing.T) {
	ns := newNS(t)
	b := coreBackend(t, ns)
	ctx := context.Background()
	r1, r2 := rwOf(t, b, "c"), rwOf(t, b, "c")
	for range 3 {
		if _, err := r1.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r2.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock of another handle beside counted readers: %v", err)
	}
	if _, err := r1.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock of the readers' handle beside them: %v", err)
	}
	in := make(chan error, 1)
	go func() {
		_, err := r2.Lock(ctx)
		in <- err
	}()
	waitFor(t, "the writer to drain", func() bool {
		in, _ := Inspect(ns, "c")
		return in.Waiters == 1
	})
	if _, err := r1.TryRLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryRLock while a writer drains: %v", err)
	}
	for range 3 {
		select {
		case err := <-in:
			t.Fatalf("writer in beside readers: %v", err)
		default:
		}
		if err := r1.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-in; err != nil {
		t.Fatal(err)
	}
	if err := r1.RUnlock(ctx); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("RUnlock not held: %v", err)
	}
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A writer of the readers' own handle waits for them, and readers
	// that come after it wait behind it.
	if _, err := r1.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := r1.Lock(ctx)
		in <- err
	}()
	time.Sleep(20 * time.Millisecond)
	late := make(chan error, 1)
	go func() {
		_, err := r1.RLock(ctx)
		late <- err
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-in:
		t.Fatalf("writer in beside its own handle's reader: %v", err)
	case err := <-late:
		t.Fatalf("reader in past a waiting writer: %v", err)
	default:
	}
	if err := r1.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-in; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-late:
		t.Fatalf("reader in beside the writer: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	if err := r1.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Close gives back what is counted.
	for range 2 {
		if _, err := r1.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r1.RUnlock(ctx); !errors.Is(err, baton.ErrClosed) {
		t.Fatalf("RUnlock after Close: %v", err)
	}
	if _, err := r2.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the readers' handle closed: %v", err)
	}
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Goroutines of a few handles read on the count path while writers of the
// same handles and of others write: no reader ever sees a writer inside,
// and no two writers are inside at once.
func TestCountedHammer(t *testing.T) {
	ns := newNS(t)
	b := coreBackend(t, ns)
	ctx := context.Background()
	var hs [3]baton.RWMutex
	for i := range hs {
		hs[i] = rwOf(t, b, "h")
	}
	var writers, readers atomic.Int32
	var bad atomic.Int64
	var reads, writes atomic.Int64
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for g := range 12 {
		h := hs[g%len(hs)]
		write := g%4 == 3
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				if write && i%8 == 0 {
					if _, err := h.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					if writers.Add(1) != 1 || readers.Load() != 0 {
						bad.Add(1)
					}
					writes.Add(1)
					writers.Add(-1)
					if err := h.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				rctx, cancel := ctx, context.CancelFunc(func() {})
				if i%16 == 5 {
					rctx, cancel = context.WithTimeout(ctx, 50*time.Microsecond)
				}
				_, err := h.RLock(rctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
						return
					}
					continue
				}
				readers.Add(1)
				if writers.Load() != 0 {
					bad.Add(1)
				}
				reads.Add(1)
				readers.Add(-1)
				if err := h.RUnlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d overlaps of a writer with another holder", bad.Load())
	}
	t.Logf("%d reads, %d writes", reads.Load(), writes.Load())
	for i, h := range hs {
		if _, err := h.TryLock(ctx); err != nil {
			t.Fatalf("handle %d: TryLock after the hammer: %v", i, err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// RLock racing Close: whatever the order, once Close returned nothing is
// held and RUnlock fails with ErrClosed or succeeds (for a hold taken
// before Close), never with another error, and a writer gets in.
func TestCountedCloseRace(t *testing.T) {
	ns := newNS(t)
	b := coreBackend(t, ns)
	ctx := context.Background()
	w := rwOf(t, b, "cr")
	for range 200 {
		r := rwOf(t, b, "cr")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 20 {
					if _, err := r.RLock(ctx); err != nil {
						if !errors.Is(err, baton.ErrClosed) {
							t.Error(err)
						}
						return
					}
					if err := r.RUnlock(ctx); err != nil && !errors.Is(err, baton.ErrClosed) {
						t.Error(err)
						return
					}
				}
			})
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if _, err := w.TryLock(ctx); err != nil {
			in, _ := Inspect(ns, "cr")
			t.Fatalf("TryLock after Close: %v (%+v)", err, in)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A process whose goroutines hold counted read locks is SIGKILLed: a
// waiting writer takes their share back and gets in.
func TestKillCountedReaders(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	b := coreBackend(t, ns)
	w := rwOf(t, b, "k")
	for range 3 {
		h := spawn(t, ns, "k", "countread")
		h.expect(t, "held")
		if _, err := w.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
			t.Fatalf("TryLock beside live counted readers: %v", err)
		}
		in := make(chan error, 1)
		go func() {
			_, err := w.Lock(ctx)
			in <- err
		}()
		select {
		case err := <-in:
			t.Fatalf("writer in beside live counted readers: %v", err)
		case <-time.After(30 * time.Millisecond):
		}
		h.kill()
		select {
		case err := <-in:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("writer not in after the readers' process was killed")
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
