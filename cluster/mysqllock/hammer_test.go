package mysqllock

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

// TestMutexHammer: goroutines of several handles of several Backends lock
// one name, many with contexts that end at random points of the wait, of
// the claim or of the hand-over. Holds never overlap, tokens increase in
// the order of the holds, and nothing is left held at the end.
func TestMutexHammer(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	name := testName(t)
	var ms []baton.Mutex
	for range 3 {
		b := openT(t, s.url(testQuery))
		for range 2 {
			m, err := b.Mutex(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
	}
	var (
		inside    atomic.Int32
		mu        sync.Mutex
		last      baton.Token
		held      atomic.Int64
		cancelled atomic.Int64
		wg        sync.WaitGroup
	)
	stop := time.Now().Add(3 * time.Second)
	for i, m := range ms {
		for g := range 3 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(i), uint64(g)))
				for time.Now().Before(stop) {
					lctx, cancel := ctx, context.CancelFunc(func() {})
					if r.IntN(2) == 0 {
						lctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(3000))*time.Microsecond)
					}
					h, err := m.Lock(lctx)
					cancel()
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("Lock: %v", err)
							return
						}
						cancelled.Add(1)
						continue
					}
					if inside.Add(1) != 1 {
						t.Error("two holds at once")
					}
					mu.Lock()
					if h.Token() <= last {
						t.Errorf("token %d after %d", h.Token(), last)
					}
					last = h.Token()
					mu.Unlock()
					held.Add(1)
					inside.Add(-1)
					if err := m.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d holds, %d cancelled Locks", held.Load(), cancelled.Load())
	if held.Load() == 0 {
		t.Fatal("no Lock succeeded")
	}
	other, _ := openT(t, s.url(testQuery)).Mutex(ctx, name)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := other.TryLock(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, baton.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("TryLock after the hammer: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	other.Unlock(ctx)
}
