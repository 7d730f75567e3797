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
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

// passDrivers returns a driver backend on s and n Mutex drivers of name.
func passDrivers(t *testing.T, s *server, name string, n int) (*backend, []driver.Lock) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	d, err := newDriver(c, []lease.Option{lease.WithTTL(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ls := make([]driver.Lock, n)
	for i := range ls {
		if ls[i], err = d.OpenMutex(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	return d, ls
}

// TestPassDriver: a hold is passed round three handles of one backend, with
// a token one above the previous each time and within the range the server
// reserved, at most passTokens times; the grant passed is released by
// another handle's driver, after which another client takes the lock at
// once. The Loss of a grant passed on never fires.
func TestPassDriver(t *testing.T) {
	s := startRedis(t)
	_, ls := passDrivers(t, s, "pass-drv", 3)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	first := g
	var old []driver.Grant
	for i := 1; i <= passTokens; i++ {
		ng, ok := ls[i%3].(driver.Passer).Pass(g)
		if !ok {
			t.Fatalf("pass %d refused", i)
		}
		if ng.Token != first.Token+uint64(i) || ng.Loss == g.Loss {
			t.Fatalf("pass %d: token %d (first %d), same Loss %v", i, ng.Token, first.Token, ng.Loss == g.Loss)
		}
		old, g = append(old, g), ng
	}
	if _, ok := ls[0].(driver.Passer).Pass(g); ok {
		t.Fatalf("pass %d accepted: the server reserved %d tokens", passTokens+1, passTokens)
	}
	// The last grant was passed by ls[15%3 = 0]; ls[2] releases it.
	if err := ls[2].Release(ctx, g); err != nil {
		t.Fatalf("Release by another handle: %v", err)
	}
	for _, o := range old {
		if err := o.Loss.Err(); err != nil {
			t.Fatalf("the Loss of a grant passed on fired: %v", err)
		}
	}
	oc := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer oc.Close()
	other, err := newDriver(oc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ol, _ := other.OpenMutex(ctx, "pass-drv")
	og, err := ol.TryAcquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatalf("another client after the release: %v", err)
	}
	if og.Token <= g.Token {
		t.Fatalf("token %d on the server after passed token %d", og.Token, g.Token)
	}
	if err := ol.Release(ctx, og); err != nil {
		t.Fatal(err)
	}
}

// TestPassLoss: when the hold beneath is lost (its key removed), the Loss
// of the grant it was passed to fires, not that of the grant passed from,
// and a lost hold is not passed.
func TestPassLoss(t *testing.T) {
	s := startRedis(t)
	d, ls := passDrivers(t, s, "pass-loss", 2)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ng, ok := ls[0].(driver.Passer).Pass(g)
	if !ok {
		t.Fatal("Pass refused")
	}
	if err := d.c.Del(ctx, mutexKeys(DefaultPrefix, "pass-loss")[0]).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ng.Loss.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the Loss of the grant passed to did not fire")
	}
	if !errors.Is(ng.Loss.Err(), baton.ErrLost) || g.Loss.Err() != nil {
		t.Fatalf("losses: passed to %v, passed from %v", ng.Loss.Err(), g.Loss.Err())
	}
	if _, ok := ls[1].(driver.Passer).Pass(ng); ok {
		t.Fatal("a lost hold was passed")
	}
	if err := ls[1].Release(ctx, ng); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Release of the lost hold: %v, want ErrLost", err)
	}
}

// TestLocalPass: two backends with four handles each hammer one Mutex.
// Holds never overlap, tokens only grow across passes within a backend and
// handoffs between backends, the server saw fewer acquisitions than the
// handles made (the backends passed holds locally), and neither backend
// starves the other.
func TestLocalPass(t *testing.T) {
	s := startRedis(t)
	url := s.URL(testQuery)
	const name = "pass"
	ctx := context.Background()
	counter := mutexKeys(DefaultPrefix, name)[1]
	c := s.Client()
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
	server := (c1 - c0) / (passTokens + 1)
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
	url := s.URL(testQuery)
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
