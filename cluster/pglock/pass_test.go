package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// passDrivers returns a driver backend and n Mutex drivers of name.
func passDrivers(t *testing.T, name string, n int) []driver.Lock {
	t.Helper()
	o, err := buildOptions([]lease.Option{lease.WithTTL(faultTTL)})
	if err != nil {
		t.Fatal(err)
	}
	d := newBackend(poolT(t), false, o)
	t.Cleanup(func() { d.Close() })
	ls := make([]driver.Lock, n)
	for i := range ls {
		if ls[i], err = d.OpenMutex(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	return ls
}

// TestPassDriver: a hold is passed round three handles of one backend with
// a token one above the previous each time, at most passTokens times; the
// grant passed is released by another handle's driver, after which another
// client takes the lock at once with a token above the passed ones. The
// Loss of a grant passed on never fires.
func TestPassDriver(t *testing.T) {
	name := fmt.Sprintf("pass-%d", time.Now().UnixNano())
	ls := passDrivers(t, name, 3)
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
		t.Fatalf("pass %d accepted: the row reserves %d tokens", passTokens+1, passTokens)
	}
	if err := ls[2].Release(ctx, g); err != nil {
		t.Fatalf("Release by another handle: %v", err)
	}
	for _, o := range old {
		if err := o.Loss.Err(); err != nil {
			t.Fatalf("the Loss of a grant passed on fired: %v", err)
		}
	}
	m := mutexT(t, openT(t, need(t)), name)
	h, err := m.TryLock(ctx)
	if err != nil {
		t.Fatalf("another client after the release: %v", err)
	}
	if uint64(h.Token()) <= g.Token {
		t.Fatalf("token %d after passed token %d", h.Token(), g.Token)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPassLoss: when the holding session is ended after a pass, the Loss
// of the grant passed to fires, not that of the grant passed from, and a
// lost hold is not passed.
func TestPassLoss(t *testing.T) {
	name := fmt.Sprintf("pass-loss-%d", time.Now().UnixNano())
	ls := passDrivers(t, name, 2)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ng, ok := ls[0].(driver.Passer).Pass(g)
	if !ok {
		t.Fatal("Pass refused")
	}
	admin(t, "SELECT pg_terminate_backend($1)", int(ng.Data.(*hold).c.Conn().PgConn().PID()))
	select {
	case <-ng.Loss.Done():
	case <-time.After(2 * faultTTL):
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
// Holds never overlap, tokens only grow, some holds were passed (while
// held, the token is not the counter row's: no acquisition drew it), and
// neither backend starves the other.
func TestLocalPass(t *testing.T) {
	url := need(t)
	name := fmt.Sprintf("pass-hammer-%d", time.Now().UnixNano())
	ctx := context.Background()
	var (
		inside, overlaps atomic.Int64
		mu               sync.Mutex
		last             baton.Token // guarded by mu
		stale, passed    int         // guarded by mu
		count            [2]int      // guarded by mu
		wg               sync.WaitGroup
	)
	pool := poolT(t)
	stop := time.Now().Add(2 * time.Second)
	for bi := range 2 {
		bk := openT(t, url)
		for range 4 {
			m := mutexT(t, bk, name)
			wg.Go(func() {
				for time.Now().Before(stop) {
					lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					h, err := m.Lock(lctx)
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					mu.Lock()
					if h.Token() <= last {
						stale++
					}
					if (count[0]+count[1])%10 == 0 {
						var n int64
						err := pool.QueryRow(ctx, `SELECT n FROM baton_tokens WHERE kind = 'mutex' AND name = $1`, name).Scan(&n)
						if err != nil {
							t.Error(err)
						} else if uint64(n) != uint64(h.Token()) {
							passed++
						}
					}
					last = h.Token()
					count[bi]++
					mu.Unlock()
					inside.Add(-1)
					if err := m.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("holds per backend %v, of the sampled %d passed", count, passed)
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d overlapping holds", n)
	}
	if stale > 0 {
		t.Errorf("%d tokens not above the previous one", stale)
	}
	if passed == 0 {
		t.Error("no sampled hold was passed")
	}
	if count[0] == 0 || count[1] == 0 {
		t.Errorf("a backend starved: %v", count)
	}
}
