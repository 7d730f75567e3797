package redislock

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestLocalPass: two backends with four handles each hammer one Mutex.
// Holds never overlap, tokens only grow across passes within a backend and
// handoffs between backends, the server saw fewer acquisitions than the
// handles made (the backends passed holds locally), and neither backend
// starves the other.
func TestLocalPass(t *testing.T) {
	s := startRedis(t)
	url := s.url(testQuery)
	const name = "pass"
	ctx := context.Background()
	counter := mutexKeys(DefaultPrefix, name)[1]
	c := s.client()
	defer c.Close()

	var (
		inside, overlaps, stale atomic.Int64
		mu                      sync.Mutex
		last                    baton.Token      // guarded by mu
		count                   [2]int           // guarded by mu
		worst                   [2]time.Duration // guarded by mu
		wg                      sync.WaitGroup
	)
	var ms [2][]baton.Mutex
	for b := range 2 {
		be := open(t, url)
		for range 4 {
			ms[b] = append(ms[b], mutex(t, be, name))
		}
	}
	// A first hold creates the counter.
	h, err := ms[0][0].Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ms[0][0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	c0, err := c.Get(ctx, counter).Int64()
	if err != nil || c0 != int64(h.Token()) {
		t.Fatalf("counter %d (%v), want the first token %d", c0, err, h.Token())
	}
	stop := time.Now().Add(1500 * time.Millisecond)
	for b := range 2 {
		for _, m := range ms[b] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					t0 := time.Now()
					h, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					waited := time.Since(t0)
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					mu.Lock()
					if h.Token() <= last {
						stale.Add(1)
					}
					last = h.Token()
					count[b]++
					worst[b] = max(worst[b], waited)
					mu.Unlock()
					inside.Add(-1)
					if err := m.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	c1, err := c.Get(ctx, counter).Int64()
	if err != nil {
		t.Fatal(err)
	}
	server := (c1 - c0) / (localPasses + 1)
	total := count[0] + count[1]
	t.Logf("%d acquisitions (%d and %d by the two backends), %d on the server; worst waits %v and %v",
		total, count[0], count[1], server, worst[0], worst[1])
	if overlaps.Load() != 0 || stale.Load() != 0 {
		t.Fatalf("%d overlapping holds, %d tokens not above the previous one", overlaps.Load(), stale.Load())
	}
	if int64(total) <= server {
		t.Errorf("%d acquisitions and %d on the server: no hold was passed locally", total, server)
	}
	for b := range 2 {
		if count[b] == 0 || worst[b] > time.Second {
			t.Errorf("backend %d: %d acquisitions, worst wait %v", b, count[b], worst[b])
		}
	}
}

// TestLocalPassCancel: handles of one backend lock with deadlines so short
// that many waiters give up while a hold is being passed to them. Whatever
// they were passed goes on or back: afterwards another backend can take the
// lock at once, and no hold overlapped another.
func TestLocalPassCancel(t *testing.T) {
	s := startRedis(t)
	url := s.url(testQuery)
	be := open(t, url)
	var inside, overlaps, got, gaveUp atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for range 8 {
		m := mutex(t, be, "cancel")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(3000))*time.Microsecond)
				_, err := m.Lock(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
						return
					}
					gaveUp.Add(1)
					continue
				}
				got.Add(1)
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				inside.Add(-1)
				if err := m.Unlock(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquisitions, %d waits given up", got.Load(), gaveUp.Load())
	if overlaps.Load() != 0 || got.Load() == 0 || gaveUp.Load() == 0 {
		t.Fatalf("%d overlaps, %d acquisitions, %d given up", overlaps.Load(), got.Load(), gaveUp.Load())
	}
	other := mutex(t, open(t, url), "cancel")
	if _, err := other.TryLock(context.Background()); err != nil {
		t.Fatalf("another backend cannot take the lock after the cancellations: %v", err)
	}
}
