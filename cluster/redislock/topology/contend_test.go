package topology

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/locktest"
)

func open(t *testing.T, url string) baton.Backend {
	t.Helper()
	b, err := redislock.OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func mutex(t *testing.T, b baton.Backend, name string) baton.Mutex {
	t.Helper()
	m, err := b.Mutex(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// contention is clients of their own Backends taking one Mutex in turn,
// each hold for up to 10 ms, recording every hold in a history: from the
// return of Lock to the call of Unlock, or to the moment the holder saw its
// Loss fire.
type contention struct {
	hist   locktest.History
	grants atomic.Int64 // holds recorded
	lost   atomic.Int64 // holds that saw their Loss fire
	errs   atomic.Int64 // Lock calls that failed
	// timeouts counts Lock calls that waited until their context ended.
	timeouts atomic.Int64
	// slowest is the longest Lock call, failed or not, in ns: a waiter
	// stuck past a TTL shows here.
	slowest atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	lastErr error // guarded by mu
}

// contend starts n clients on name, each with a Backend of url.
func contend(t *testing.T, url, name string, n int) *contention {
	c := &contention{stop: make(chan struct{})}
	for i := range n {
		m := mutex(t, open(t, url), name)
		c.wg.Add(1)
		go c.client(m, string(rune('A'+i)))
	}
	return c
}

func (c *contention) client(m baton.Mutex, who string) {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t0 := time.Now()
		h, err := m.Lock(ctx)
		cancel()
		d := time.Since(t0)
		for {
			s := c.slowest.Load()
			if int64(d) <= s || c.slowest.CompareAndSwap(s, int64(d)) {
				break
			}
		}
		if err != nil {
			c.errs.Add(1)
			if errors.Is(err, context.DeadlineExceeded) {
				c.timeouts.Add(1)
			}
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			continue
		}
		start := locktest.Mono()
		hold := time.NewTimer(time.Duration(rand.IntN(10_000)) * time.Microsecond)
		lost := false
		select {
		case <-hold.C:
		case <-h.Lost():
			hold.Stop()
			lost = true
		}
		if h.Err() != nil {
			lost = true
		}
		end := locktest.Mono()
		c.hist.Add(locktest.Rec{Start: start, End: end, Exclusive: true, Token: uint64(h.Token()), N: 1, Who: who})
		c.grants.Add(1)
		if lost {
			c.lost.Add(1)
		}
		uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.Unlock(uctx); err != nil && !errors.Is(err, baton.ErrLost) {
			c.errs.Add(1)
		}
		ucancel()
	}
}

// waitGrants waits until more than n holds were recorded, or d passes.
func (c *contention) waitGrants(t *testing.T, n int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for c.grants.Load() <= n {
		if time.Now().After(deadline) {
			c.mu.Lock()
			err := c.lastErr
			c.mu.Unlock()
			t.Fatalf("no more than %d holds after %v (failed Locks: %d, last: %v)", n, d, c.errs.Load(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finish stops the clients and checks the history: no two holds overlap,
// and tokens increase in the order the holds began.
func (c *contention) finish(t *testing.T) {
	t.Helper()
	close(c.stop)
	c.wg.Wait()
	for _, err := range locktest.Check(c.hist.Records(), 0) {
		t.Error(err)
	}
	t.Logf("%d holds (%d saw their Loss), %d failed calls, slowest Lock %v",
		c.grants.Load(), c.lost.Load(), c.errs.Load(), time.Duration(c.slowest.Load()))
}
