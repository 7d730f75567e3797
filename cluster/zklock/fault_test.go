package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/locktest"
)

// Fault tests: a 3-node ensemble whose leader is killed or stopped while
// clients hold and queue, and clients cut off from the servers for longer
// than their session timeout. Every grant is checked against every hold
// still out: a hold that does not report itself lost when another client
// is granted the lock is a double grant.

const faultTTL = 1500 * time.Millisecond

func open(t testing.TB, url string) baton.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := OpenURL(ctx, url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// checker sees every grant and release of one name.
type checker struct {
	t      testing.TB
	mu     sync.Mutex
	active map[*baton.Hold]string
	max    baton.Token
	hist   locktest.History
	grants atomic.Int64
	lost   atomic.Int64
}

func newChecker(t testing.TB) *checker {
	return &checker{t: t, active: make(map[*baton.Hold]string)}
}

// granted checks, the moment a Lock returned, that every other hold is
// known lost and that the token exceeds every earlier one.
func (c *checker) granted(h *baton.Hold, who string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for o, ow := range c.active {
		if o.Err() == nil {
			c.t.Errorf("double grant: %s granted (token %d) while %s holds (token %d) and is not lost", who, h.Token(), ow, o.Token())
		}
		select {
		case <-o.Lost():
		default:
			c.t.Errorf("%s granted while Lost() of %s's hold is not closed", who, ow)
		}
	}
	if h.Token() <= c.max {
		c.t.Errorf("token %d of %s does not exceed %d", h.Token(), who, c.max)
	}
	c.max = max(c.max, h.Token())
	c.active[h] = who
	c.grants.Add(1)
}

// releasing is called before Unlock: a hold given back may be granted to
// another before Unlock returns.
func (c *checker) releasing(h *baton.Hold, start int64) {
	c.mu.Lock()
	who := c.active[h]
	delete(c.active, h)
	c.mu.Unlock()
	if h.Err() != nil {
		c.lost.Add(1)
		return
	}
	c.hist.Add(locktest.Rec{Start: start, End: locktest.Mono(), Exclusive: true, Token: uint64(h.Token()), N: 1, Who: who})
}

// await waits until n grants were made in all.
func (c *checker) await(t *testing.T, n int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for c.grants.Load() < n {
		if time.Now().After(deadline) {
			t.Errorf("%d grants after %v, want %d", c.grants.Load(), d, n)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *checker) check() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, err := range locktest.Check(c.hist.Records(), 0) {
		c.t.Error(err)
	}
}

// hammer runs two goroutines per backend taking and giving back one mutex
// until stop closes; every failure but a lost hold or session, a timeout
// or an unreachable server is an error.
func hammer(t *testing.T, bs []baton.Backend, name string, c *checker, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, b := range bs {
		for j := range 2 {
			who := fmt.Sprintf("client %d/%d", i, j)
			m, err := b.Mutex(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				defer m.Close()
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					h, err := m.Lock(ctx)
					cancel()
					if err != nil {
						if !errors.Is(err, baton.ErrLost) && !errors.Is(err, context.DeadlineExceeded) {
							t.Logf("%s: Lock: %v", who, err)
						}
						time.Sleep(10 * time.Millisecond)
						continue
					}
					start := locktest.Mono()
					c.granted(&h, who)
					time.Sleep(2 * time.Millisecond)
					c.releasing(&h, start)
					if err := m.Unlock(context.Background()); err != nil && !errors.Is(err, baton.ErrLost) {
						t.Logf("%s: Unlock: %v", who, err)
					}
				}
			})
		}
	}
	return &wg
}

func TestEnsembleFaults(t *testing.T) {
	en := startEnsemble(t, 3)
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, s *zkServer)
	}{
		{"LeaderSIGKILL", func(t *testing.T, s *zkServer) {
			s.stop()
		}},
		{"LeaderSIGSTOP", func(t *testing.T, s *zkServer) {
			s.signal(syscall.SIGSTOP)
			time.Sleep(2 * faultTTL)
			s.signal(syscall.SIGCONT)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One client on each server alone (the leader's cannot go
			// elsewhere and loses its session) and one on all of them.
			var bs []baton.Backend
			for _, a := range en.addrs() {
				bs = append(bs, open(t, fmt.Sprintf("zk://%s/%s?ttl=%v", a, tc.name, faultTTL)))
			}
			bs = append(bs, open(t, en.url(tc.name)+fmt.Sprintf("?ttl=%v", faultTTL)))
			c := newChecker(t)
			stop := make(chan struct{})
			wg := hammer(t, bs, "m", c, stop)
			sc := &semChecker{t: t, cap: 3, active: make(map[*baton.Hold]int64)}
			swg := hammerSem(t, bs, "s", sc, stop)
			c.await(t, 10, 20*time.Second)
			before := c.grants.Load()
			li := en.leader(t)
			// A hold through the leader alone, and a waiter through
			// every server: the hold is lost with the session, before
			// the waiter is granted.
			c2 := newChecker(t)
			held := holdAcross(t, bs[li], bs[len(bs)-1], c2)
			t0 := time.Now()
			tc.fault(t, en.servers[li])
			en.waitServing(t, 20*time.Second)
			t.Logf("fault on leader %d: ensemble serving again after %v", li+1, time.Since(t0).Round(time.Millisecond))
			mid := c.grants.Load()
			time.Sleep(faultTTL) // sessions on the faulty server expire meanwhile
			c.await(t, mid+10, 20*time.Second)
			close(stop)
			wg.Wait()
			swg.Wait()
			c.check()
			sc.check()
			held()
			after := c.grants.Load()
			t.Logf("grants: %d before the fault, %d during, %d after; %d holds lost; semaphore grants %d", before, mid-before, after-mid, c.lost.Load(), sc.grants.Load())
			if en.servers[li].cmd == nil {
				en.servers[li].start(t, en.peers)
				en.waitServing(t, 20*time.Second)
			}
		})
	}
	t.Run("Partition", func(t *testing.T) { testPartition(t, en.addrs()[0], en.url("partition")) })
}

// holdAcross takes name "held" through a, then queues for it through b;
// the function it returns waits for b's grant, which c checks against a's
// hold.
func holdAcross(t *testing.T, a, b baton.Backend, c *checker) func() {
	ctx := context.Background()
	ma, err := a.Mutex(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	mb, err := b.Mutex(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	ha, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.granted(&ha, "holder through the leader")
	res := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for {
			// A waiter whose session could not be vouched for in time
			// is told so, and queues again.
			hb, err := mb.Lock(wctx)
			if errors.Is(err, baton.ErrLost) {
				continue
			}
			if err == nil {
				c.granted(&hb, "waiter through every server")
				err = mb.Unlock(ctx)
			}
			res <- err
			return
		}
	}()
	time.Sleep(100 * time.Millisecond)
	return func() {
		if err := <-res; err != nil {
			t.Errorf("waiter through every server: %v", err)
		}
		if err := ha.Err(); !errors.Is(err, baton.ErrLost) {
			t.Errorf("hold through the faulty leader: Err %v, want ErrLost", err)
		}
		_ = ma.Unlock(ctx)
		ma.Close()
		mb.Close()
	}
}
