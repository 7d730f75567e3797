package etcdlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

func testPass(t *testing.T, c *cluster) {
	t.Run("Tokens", func(t *testing.T) { testPassTokens(t, c) })
	t.Run("Loss", func(t *testing.T) { testPassLoss(t, c) })
	t.Run("RacesRemove", func(t *testing.T) { testPassRacesRemove(t, c) })
	t.Run("Stress", func(t *testing.T) { testPassStress(t, c) })
}

// passDrivers opens n Mutex drivers of one name on one backend driver.
func passDrivers(t *testing.T, d *backend, name string, n int) []*mutexDriver {
	t.Helper()
	var ds []*mutexDriver
	for range n {
		l := must(d.OpenMutex(context.Background(), name)).get(t)
		md, ok := l.(*mutexDriver)
		if !ok {
			t.Fatalf("OpenMutex returned %T, not a Passer", l)
		}
		ds = append(ds, md)
	}
	return ds
}

// notFired checks that l has not fired.
func notFired(t *testing.T, what string, l *driver.Loss) {
	t.Helper()
	if err := l.Err(); err != nil {
		t.Fatalf("%s: fired: %v", what, err)
	}
}

// fires waits for l to fire.
func fires(t *testing.T, what string, l *driver.Loss) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(3 * time.Second):
		t.Fatalf("%s: no loss after 3s", what)
	}
}

// A hold passes at most maxPasses times, every pass with a higher token,
// the last handle's Release deletes the key, and the next acquisition, by
// another Backend, draws a higher token than every pass. RWMutex drivers do
// not pass.
func testPassTokens(t *testing.T, c *cluster) {
	ctx := context.Background()
	_, d := fast(t, c, "pass-tokens")
	ds := passDrivers(t, d, "m", 2)
	g := must(ds[0].Acquire(ctx, driver.Exclusive)).get(t)
	first := g.Token
	for i := range maxPasses {
		ng, ok := ds[i%2].Pass(g)
		if !ok {
			t.Fatalf("pass %d refused", i+1)
		}
		if ng.Token <= g.Token {
			t.Fatalf("pass %d: token %d after %d", i+1, ng.Token, g.Token)
		}
		notFired(t, "passed hold", ng.Loss)
		g = ng
	}
	if _, ok := ds[1].Pass(g); ok {
		t.Fatalf("pass %d of one key allowed: its tokens would reach the next key's", maxPasses+1)
	}
	notFired(t, "hold after a refused pass", g.Loss)
	if err := ds[1].Release(ctx, g); err != nil {
		t.Fatalf("release of a passed hold: %v", err)
	}
	checkEmpty(t, c, "pass-tokens/")
	// Another Backend's acquisition comes after every pass.
	_, d2 := fast(t, c, "pass-tokens")
	o := passDrivers(t, d2, "m", 1)[0]
	g2 := must(o.TryAcquire(ctx, driver.Exclusive)).get(t)
	if g2.Token <= g.Token || g.Token-first != maxPasses {
		t.Errorf("tokens: first %d, last pass %d, next key %d", first, g.Token, g2.Token)
	}
	if err := o.Release(ctx, g2); err != nil {
		t.Fatal(err)
	}
	// A lease whose renewal is late is not passed on.
	g = must(ds[0].Acquire(ctx, driver.Exclusive)).get(t)
	s := d.cur.Load()
	s.ls.SetDeadline(time.Now().Add(s.o.renewal / 2))
	if _, ok := ds[0].Pass(g); ok {
		t.Error("a hold was passed with less than a renewal period left on its lease")
	}
	s.ls.SetDeadline(time.Now().Add(time.Minute))
	notFired(t, "hold after a refused pass", g.Loss)
	g = must2(ds[0].Pass(g))(t)
	if err := ds[0].Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	rw := must(d.OpenRWMutex(ctx, "rw")).get(t)
	if _, ok := rw.(driver.Passer); ok {
		t.Error("an RWMutex driver passes holds")
	}
}

// After a pass, the new hold's loss is the one that fires: when the key is
// removed by another client (the hold's watch), through the holder's own
// Backend, or when the session's lease is revoked. The old one never does.
func testPassLoss(t *testing.T, c *cluster) {
	ctx := context.Background()
	for _, how := range []string{"remove-other", "remove-own", "revoke"} {
		t.Run(how, func(t *testing.T) {
			_, d := fast(t, c, "pass-loss-"+how)
			other, _ := fast(t, c, "pass-loss-"+how)
			ds := passDrivers(t, d, "m", 2)
			g := must(ds[0].Acquire(ctx, driver.Exclusive)).get(t)
			// Two passes: the second one's watch is the first hold's.
			g1 := must2(ds[0].Pass(g))(t)
			g2 := must2(ds[1].Pass(g1))(t)
			time.Sleep(100 * time.Millisecond) // the watch is set up
			switch how {
			case "remove-other":
				if err := other.(baton.Inspector).Remove(ctx, baton.KindMutex, "m"); err != nil {
					t.Fatal(err)
				}
			case "remove-own":
				if err := d.Remove(ctx, baton.KindMutex, "m"); err != nil {
					t.Fatal(err)
				}
				notFiredYet := g2.Loss.Err() == nil
				if notFiredYet {
					t.Error("a Remove through the holder's Backend returned before the passed hold's loss fired")
				}
			case "revoke":
				if _, err := d.c.Revoke(ctx, leaseOf(t, d)); err != nil {
					t.Fatal(err)
				}
			}
			fires(t, "passed hold", g2.Loss)
			time.Sleep(50 * time.Millisecond)
			notFired(t, "hold passed on", g.Loss)
			notFired(t, "hold passed on", g1.Loss)
			if err := ds[1].Release(ctx, g2); !errors.Is(err, baton.ErrLost) {
				t.Errorf("release of a lost passed hold: %v", err)
			}
			if _, ok := ds[0].Pass(g2); ok {
				t.Error("a lost hold was passed")
			}
		})
	}
}

// must2 is must for a (value, ok) pair.
func must2(g driver.Grant, ok bool) func(*testing.T) driver.Grant {
	return func(t *testing.T) driver.Grant {
		t.Helper()
		if !ok {
			t.Fatal("pass refused")
		}
		return g
	}
}

// Passes racing a Remove from another client: a pass that succeeds leaves
// the loss to the new hold, which fires, and the old one never does; a
// refused pass leaves it to the old one, which has fired or fires.
func testPassRacesRemove(t *testing.T, c *cluster) {
	ctx := context.Background()
	_, d := fast(t, c, "pass-race")
	other, _ := fast(t, c, "pass-race")
	in := other.(baton.Inspector)
	ds := passDrivers(t, d, "m", 2)
	passed := 0
	for i := range 30 {
		g := must(ds[0].Acquire(ctx, driver.Exclusive)).get(t)
		done := make(chan error, 1)
		go func() {
			time.Sleep(time.Duration(i%6) * time.Millisecond)
			done <- in.Remove(ctx, baton.KindMutex, "m")
		}()
		cur, from := g, ds[0]
		for k := 0; k < maxPasses; k++ {
			ng, ok := from.Pass(cur)
			if !ok {
				break
			}
			passed++
			time.Sleep(500 * time.Microsecond)
			notFired(t, "passed-on hold", cur.Loss)
			cur, from = ng, ds[(k+1)%2]
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		fires(t, "hold whose key was removed", cur.Loss)
		if !errors.Is(from.Release(ctx, cur), baton.ErrLost) {
			t.Fatal("release after remove did not report the loss")
		}
	}
	if passed == 0 {
		t.Error("no pass happened")
	}
}

// Handles of two Backends contend on one Mutex, some with deadlines short
// enough to be cancelled while queued: holds never overlap, and tokens
// taken in the order of holding only grow, across passes within a Backend
// and acquisitions from etcd alike.
func testPassStress(t *testing.T, c *cluster) {
	ctx := context.Background()
	var (
		inside, overlaps atomic.Int32
		mu               sync.Mutex
		last             baton.Token // guarded by mu
		held             int         // guarded by mu
		wg               sync.WaitGroup
	)
	stop := time.Now().Add(2 * time.Second)
	for range 2 {
		b, _ := fast(t, c, "pass-stress")
		for w := range 4 {
			m := must(b.Mutex(ctx, "m")).get(t)
			t.Cleanup(func() { m.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					lctx, cancel := ctx, context.CancelFunc(func() {})
					if (i+w)%3 == 0 {
						lctx, cancel = context.WithTimeout(ctx, time.Duration(i%4)*500*time.Microsecond)
					}
					h, err := m.Lock(lctx)
					cancel()
					if err != nil {
						if lctx.Err() == nil {
							t.Errorf("lock: %v", err)
							return
						}
						continue
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					mu.Lock()
					if h.Token() <= last {
						t.Errorf("token %d after %d", h.Token(), last)
					}
					last = h.Token()
					held++
					mu.Unlock()
					inside.Add(-1)
					if err := m.Unlock(ctx); err != nil {
						t.Errorf("unlock: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping holds", n)
	}
	t.Logf("%d holds", held)
	checkEmpty(t, c, "pass-stress/")
}
