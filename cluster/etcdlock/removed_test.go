package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// removedCase is one kind of hold: take it, take it again from another
// client (TryLock), give it back.
type removedCase struct {
	kind    baton.Kind
	take    func(ctx context.Context, b baton.Backend, name string) (baton.Hold, func() error, error)
	tryTake func(ctx context.Context, b baton.Backend, name string) (baton.Hold, func() error, error)
}

func removedCases() map[string]removedCase {
	mutex := func(try bool) func(context.Context, baton.Backend, string) (baton.Hold, func() error, error) {
		return func(ctx context.Context, b baton.Backend, name string) (baton.Hold, func() error, error) {
			m, err := b.Mutex(ctx, name)
			if err != nil {
				return baton.Hold{}, nil, err
			}
			lock := m.Lock
			if try {
				lock = m.TryLock
			}
			h, err := lock(ctx)
			return h, func() error { return m.Unlock(ctx) }, err
		}
	}
	rw := func(read, try bool) func(context.Context, baton.Backend, string) (baton.Hold, func() error, error) {
		return func(ctx context.Context, b baton.Backend, name string) (baton.Hold, func() error, error) {
			m, err := b.RWMutex(ctx, name)
			if err != nil {
				return baton.Hold{}, nil, err
			}
			lock, unlock := m.Lock, m.Unlock
			switch {
			case read && try:
				lock, unlock = m.TryRLock, m.RUnlock
			case read:
				lock, unlock = m.RLock, m.RUnlock
			case try:
				lock = m.TryLock
			}
			h, err := lock(ctx)
			return h, func() error { return unlock(ctx) }, err
		}
	}
	sem := func(try bool) func(context.Context, baton.Backend, string) (baton.Hold, func() error, error) {
		return func(ctx context.Context, b baton.Backend, name string) (baton.Hold, func() error, error) {
			s, err := b.Semaphore(ctx, name, 2)
			if err != nil {
				return baton.Hold{}, nil, err
			}
			acq := s.Acquire
			if try {
				acq = s.TryAcquire
			}
			h, err := acq(ctx, 2)
			return h, func() error { return s.Release(ctx, 2) }, err
		}
	}
	return map[string]removedCase{
		"Mutex":      {baton.KindMutex, mutex(false), mutex(true)},
		"RWMutex/W":  {baton.KindRWMutex, rw(false, false), rw(false, true)},
		"RWMutex/R":  {baton.KindRWMutex, rw(true, false), rw(false, true)},
		"Semaphore":  {baton.KindSemaphore, sem(false), sem(true)},
		"MutexTry":   {baton.KindMutex, mutex(true), mutex(true)},
		"SemaphoreT": {baton.KindSemaphore, sem(true), sem(true)},
	}
}

// A hold whose key someone else removes (Inspector's Remove, as `baton rm`
// does) sees its loss promptly; its Unlock reports the loss and leaves the
// key of the client that took the name since alone.
func testRemovedHold(t *testing.T, c *cluster) {
	for name, tc := range removedCases() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			prefix := "removed-" + name
			ba, _ := fast(t, c, prefix)
			bb, _ := fast(t, c, prefix)
			br, _ := fast(t, c, prefix)
			// Writes of other names move the revision on between the
			// grant and the setup of its watch.
			other := must(br.Mutex(ctx, "other")).get(t)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := other.Lock(ctx); err == nil {
						_ = other.Unlock(ctx)
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()

			got := func(h baton.Hold, unlock func() error, err error) (baton.Hold, func() error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return h, unlock
			}
			for round := range 3 {
				n := fmt.Sprintf("n%d", round)
				ha, unlockA := got(tc.take(ctx, ba, n))
				if round == 1 {
					time.Sleep(300 * time.Millisecond) // past a renewal
				}
				// Round 2 removes through the holder's own Backend, whose
				// holders know before Remove returns.
				remover := br
				if round == 2 {
					remover = ba
				}
				removed := time.Now()
				if err := remover.(baton.Inspector).Remove(ctx, tc.kind, n); err != nil {
					t.Fatal(err)
				}
				if round == 2 && ha.Err() == nil {
					t.Errorf("Remove through the holder's Backend returned before the loss fired")
				}
				select {
				case <-ha.Lost():
				case <-time.After(time.Second):
					t.Fatalf("round %d: no loss 1s after Remove", round)
				}
				t.Logf("round %d: loss %v after Remove began", round, time.Since(removed))
				if err := ha.Err(); !errors.Is(err, baton.ErrLost) {
					t.Fatalf("Err %v, want ErrLost", err)
				}
				hb, unlockB := got(tc.tryTake(ctx, bb, n))
				if hb.Token() <= ha.Token() {
					t.Errorf("token %d after %d", hb.Token(), ha.Token())
				}
				if err := unlockA(); !errors.Is(err, baton.ErrLost) {
					t.Errorf("Unlock of the removed hold: %v, want ErrLost", err)
				}
				select {
				case <-hb.Lost():
					t.Fatalf("the next holder lost its hold: %v", hb.Err())
				default:
				}
				if err := unlockB(); err != nil {
					t.Errorf("Unlock of the next holder: %v (its key was touched)", err)
				}
			}
		})
	}
}

// A released hold does not fire its loss, and a hold kept through
// Downgrade and a partial release is still watched.
func testReleasedNotLost(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, _ := fast(t, c, "released")
	in := b.(baton.Inspector)
	m := must(b.Mutex(ctx, "m")).get(t)
	var holds []baton.Hold
	for range 20 {
		h := must(m.Lock(ctx)).get(t)
		holds = append(holds, h)
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rw := must(b.RWMutex(ctx, "rw")).get(t)
	must(rw.Lock(ctx)).get(t)
	hr := must(rw.Downgrade(ctx)).get(t)
	s := must(b.Semaphore(ctx, "s", 3)).get(t)
	hs := must(s.Acquire(ctx, 3)).get(t)
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	for i, h := range holds {
		if err := h.Err(); err != nil {
			t.Fatalf("hold %d released normally reports %v", i, err)
		}
	}
	if err := hr.Err(); err != nil {
		t.Fatalf("downgraded hold: %v", err)
	}
	if err := hs.Err(); err != nil {
		t.Fatalf("partly released hold: %v", err)
	}
	if err := in.Remove(ctx, baton.KindRWMutex, "rw"); err != nil {
		t.Fatal(err)
	}
	if err := in.Remove(ctx, baton.KindSemaphore, "s"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []baton.Hold{hr, hs} {
		select {
		case <-h.Lost():
		case <-time.After(time.Second):
			t.Fatal("no loss 1s after Remove")
		}
	}
	if err := rw.RUnlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("RUnlock: %v", err)
	}
	if err := s.Release(ctx, 2); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Release: %v", err)
	}
}

// Removals racing with Lock and Unlock on several clients: a hold whose
// Unlock succeeded never reports a loss, and one whose Unlock reports the
// loss has fired it.
func testRemoveRacesUnlock(t *testing.T, c *cluster) {
	ctx := context.Background()
	bs := []baton.Backend{}
	for range 2 {
		b, _ := fast(t, c, "removerace")
		bs = append(bs, b)
	}
	in := bs[0].(baton.Inspector)
	type outcome struct {
		h   baton.Hold
		err error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(2 * time.Second)
	for w := range 4 {
		m := must(bs[w%2].Mutex(ctx, "m")).get(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				h, err := m.Lock(lctx)
				cancel()
				if err != nil {
					continue // its waiting key was removed, or it timed out
				}
				err = m.Unlock(ctx)
				mu.Lock()
				outcomes = append(outcomes, outcome{h, err})
				mu.Unlock()
			}
		}()
	}
	removes := 0
	for time.Now().Before(deadline) {
		if err := in.Remove(ctx, baton.KindMutex, "m"); err == nil {
			removes++
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // let late watch events arrive
	lost := 0
	for i, o := range outcomes {
		switch {
		case o.err == nil && o.h.Err() != nil:
			t.Errorf("hold %d: Unlock succeeded but the hold reports %v", i, o.h.Err())
		case o.err != nil && !errors.Is(o.err, baton.ErrLost):
			t.Errorf("hold %d: Unlock: %v", i, o.err)
		case o.err != nil && o.h.Err() == nil:
			t.Errorf("hold %d: Unlock reported %v but the loss did not fire", i, o.err)
		case o.err != nil:
			lost++
		}
	}
	t.Logf("%d holds, %d lost, %d removals", len(outcomes), lost, removes)
	if len(outcomes) == 0 {
		t.Fatal("no hold taken")
	}
}
