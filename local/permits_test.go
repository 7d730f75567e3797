package local_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// The permit path of the shared-memory semaphore (the core takes and gives
// back permits without its handle lock) keeps the core's guarantees; each
// test runs on System V too, which has no permit path.

func semSuites(t *testing.T, f func(t *testing.T, b baton.Backend)) {
	for _, opt := range []local.SemImpl{local.SemShm, local.SemSysV} {
		t.Run(string(opt), func(t *testing.T) {
			b, err := local.Open(namespace(t), local.WithSemaphore(opt))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			f(t, b)
		})
	}
}

func TestSemStrayRelease(t *testing.T) {
	ctx := context.Background()
	semSuites(t, func(t *testing.T, b baton.Backend) {
		s, err := b.Semaphore(ctx, "stray", 4)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Release(ctx, 1); !errors.Is(err, baton.ErrNotHeld) {
			t.Errorf("Release with nothing held = %v, want ErrNotHeld", err)
		}
		if _, err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, 2); !errors.Is(err, baton.ErrNotHeld) {
			t.Errorf("Release(2) of 1 held = %v, want ErrNotHeld", err)
		}
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, 1); !errors.Is(err, baton.ErrNotHeld) {
			t.Errorf("second Release = %v, want ErrNotHeld", err)
		}
		if _, err := s.Acquire(ctx, 0); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Acquire(0) = %v", err)
		}
		if _, err := s.Acquire(ctx, 5); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Acquire(5) of 4 = %v", err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Acquire(done, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire with a done context = %v", err)
		}
	})
}

// A goroutine waiting for 4 permits is not overtaken by smaller requests of
// its handle, and a Release of permits taken both ways gives back all.
func TestSemQueuedNotOvertaken(t *testing.T) {
	ctx := context.Background()
	semSuites(t, func(t *testing.T, b baton.Backend) {
		s, err := b.Semaphore(ctx, "fifo", 4)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := s.Acquire(ctx, 4)
			got <- err
		}()
		time.Sleep(30 * time.Millisecond) // the Acquire(4) waits
		if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, baton.ErrLocked) {
			t.Errorf("TryAcquire(1) behind a waiting Acquire(4) = %v, want ErrLocked", err)
		}
		late := make(chan error, 1)
		go func() {
			_, err := s.Acquire(ctx, 1)
			late <- err
		}()
		time.Sleep(30 * time.Millisecond)
		select {
		case err := <-late:
			t.Fatalf("Acquire(1) overtook the waiting Acquire(4): %v", err)
		default:
		}
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, 4); err != nil {
			t.Fatal(err)
		}
		if err := <-late; err != nil {
			t.Fatal(err)
		}
		// One permit from the queue, two more on the permit path: one
		// Release gives back all three.
		if _, err := s.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, 3); err != nil {
			t.Fatalf("Release(3) of permits taken both ways: %v", err)
		}
		if _, err := s.TryAcquire(ctx, 4); err != nil {
			t.Fatalf("permits not all given back: %v", err)
		}
		if err := s.Release(ctx, 4); err != nil {
			t.Fatal(err)
		}
	})
}

// Goroutines of two handles take and give back permits while one handle is
// closed: never more than the capacity in use, and Close gives back every
// permit its handle held.
func TestSemHammerClose(t *testing.T) {
	ctx := context.Background()
	semSuites(t, func(t *testing.T, b baton.Backend) {
		const capacity = 3
		for round := range 5 {
			hs := make([]baton.Semaphore, 2)
			for i := range hs {
				var err error
				if hs[i], err = b.Semaphore(ctx, "hammer", capacity); err != nil {
					t.Fatal(err)
				}
			}
			// The permits each handle's goroutines count as theirs. The
			// closing handle's count stops counting once its Close
			// starts: Close gives back what its goroutines hold while
			// they still count it, and a permit it gave back may be
			// taken by the other handle at once.
			var inUse [2]atomic.Int64
			var closing [2]atomic.Bool
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for g := range 8 {
				i := g % 2
				s := hs[i]
				n := int64(g%capacity + 1)
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := s.Acquire(ctx, n); err != nil {
							if errors.Is(err, baton.ErrClosed) {
								return
							}
							t.Error(err)
							return
						}
						v := inUse[i].Add(n)
						if !closing[i].Load() {
							if !closing[1-i].Load() {
								v += inUse[1-i].Load()
							}
							if v > capacity {
								t.Errorf("%d permits in use of %d", v, capacity)
							}
						}
						inUse[i].Add(-n)
						if err := s.Release(ctx, n); err != nil && !errors.Is(err, baton.ErrClosed) {
							t.Error(err)
							return
						}
					}
				})
			}
			time.Sleep(20 * time.Millisecond)
			closing[round%2].Store(true)
			if err := hs[round%2].Close(); err != nil {
				t.Error(err)
			}
			time.Sleep(10 * time.Millisecond)
			close(stop)
			wg.Wait()
			other := hs[(round+1)%2]
			if _, err := other.TryAcquire(ctx, capacity); err != nil {
				t.Fatalf("round %d: permits of the closed handle not given back: %v", round, err)
			}
			if err := other.Release(ctx, capacity); err != nil {
				t.Fatal(err)
			}
			other.Close()
		}
	})
}

// Close gives back the permits its handle holds, and a Release after it
// reports ErrClosed.
func TestSemCloseGivesBack(t *testing.T) {
	ctx := context.Background()
	semSuites(t, func(t *testing.T, b baton.Backend) {
		a, err := b.Semaphore(ctx, "close", 4)
		if err != nil {
			t.Fatal(err)
		}
		o, err := b.Semaphore(ctx, "close", 4)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if _, err := a.Acquire(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx, 3); !errors.Is(err, baton.ErrClosed) {
			t.Errorf("Release after Close = %v, want ErrClosed", err)
		}
		if _, err := a.Acquire(ctx, 1); !errors.Is(err, baton.ErrClosed) {
			t.Errorf("Acquire after Close = %v, want ErrClosed", err)
		}
		if _, err := o.TryAcquire(ctx, 4); err != nil {
			t.Fatalf("permits of the closed handle not given back: %v", err)
		}
		if err := o.Release(ctx, 4); err != nil {
			t.Fatal(err)
		}
	})
}
