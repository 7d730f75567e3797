package zklock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/locktest"
)

// semChecker sees every grant and release of one semaphore: at each grant
// the permits of the holds not known lost, with the new one, must fit.
type semChecker struct {
	t      testing.TB
	cap    int64
	mu     sync.Mutex
	active map[*baton.Hold]int64
	hist   locktest.History
	grants atomic.Int64
}

func (c *semChecker) granted(h *baton.Hold, n int64, who string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := n
	for o, k := range c.active {
		if o.Err() == nil {
			sum += k
		}
	}
	if sum > c.cap {
		c.t.Errorf("%s granted %d permits while %d are held by holds not lost (capacity %d)", who, n, sum-n, c.cap)
	}
	c.active[h] = n
	c.grants.Add(1)
}

func (c *semChecker) releasing(h *baton.Hold, n int64, start int64, who string) {
	c.mu.Lock()
	delete(c.active, h)
	c.mu.Unlock()
	if h.Err() == nil {
		c.hist.Add(locktest.Rec{Start: start, End: locktest.Mono(), Token: uint64(h.Token()), N: n, Who: who})
	}
}

// hammerSem runs two goroutines per backend acquiring 1 or 2 permits of a
// semaphore of capacity c.cap until stop closes.
func hammerSem(t *testing.T, bs []baton.Backend, name string, c *semChecker, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, b := range bs {
		for j := range 2 {
			who := fmt.Sprintf("client %d/%d", i, j)
			s, err := b.Semaphore(context.Background(), name, c.cap)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				defer s.Close()
				for {
					select {
					case <-stop:
						return
					default:
					}
					n := 1 + rand.Int64N(2)
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					h, err := s.Acquire(ctx, n)
					cancel()
					if err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					start := locktest.Mono()
					c.granted(&h, n, who)
					time.Sleep(2 * time.Millisecond)
					c.releasing(&h, n, start, who)
					if err := s.Release(context.Background(), n); err != nil && !errors.Is(err, baton.ErrLost) {
						t.Logf("%s: Release: %v", who, err)
					}
				}
			})
		}
	}
	return &wg
}

func (c *semChecker) check() {
	for _, err := range locktest.Check(c.hist.Records(), c.cap) {
		c.t.Error(err)
	}
}
