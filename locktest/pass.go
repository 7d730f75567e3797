package locktest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// PassHammer has four handles on each of two Backends lock one Mutex name
// in a loop for d, one goroutine per handle, and checks what passing holds
// among the handles of a Backend (driver.Passer) must keep: holds never
// overlap, tokens strictly increase across passes and across Backends,
// neither Backend starves the other, and some holds were passed, which
// passed tells from a hold's token (drivers reserve a range of tokens per
// acquisition). It returns the holds per Backend.
func PassHammer(t *testing.T, bs [2]baton.Backend, name string, d time.Duration, passed func(baton.Token) bool) [2]int {
	t.Helper()
	ctx := context.Background()
	var (
		inside, overlaps atomic.Int64
		mu               sync.Mutex
		last             baton.Token // guarded by mu
		stale, passes    int         // guarded by mu
		count            [2]int      // guarded by mu
		wg               sync.WaitGroup
	)
	stop := time.Now().Add(d)
	for bi, b := range bs {
		for range 4 {
			m, err := b.Mutex(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			wg.Go(func() {
				for time.Now().Before(stop) {
					lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
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
					if passed(h.Token()) {
						passes++
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
	t.Logf("holds per backend %v, %d of them passed", count, passes)
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d overlapping holds", n)
	}
	if stale > 0 {
		t.Errorf("%d tokens not above the previous one", stale)
	}
	if passes == 0 {
		t.Error("no hold was passed")
	}
	if count[0] == 0 || count[1] == 0 {
		t.Errorf("a backend starved: %v", count)
	}
	return count
}
