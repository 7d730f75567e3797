package filelock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// TestOrphanWaitersWake: handles of this process wait on a file that is
// then removed (as a reclaim removes it) and released. Each takes the
// orphan's flock in turn, gives it back and moves to the path's new file;
// one that tried while another held the orphan sleeps on the orphan's
// generation, which that other's give-back must move, since nothing else
// will (holders of this process are not watched; they release with a
// wake). Every waiter gets the lock, in every round.
func TestOrphanWaitersWake(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for round := range 200 {
		path := filepath.Join(dir, "orphan")
		first, err := OpenMutex(path)
		if err != nil {
			t.Fatal(err)
		}
		g, err := first.Acquire(ctx, driver.Exclusive)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 3
		var wg sync.WaitGroup
		errs := make(chan error, waiters)
		var ms []*Mutex
		for range waiters {
			m, err := OpenMutex(path)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				g, err := m.Acquire(cctx, driver.Exclusive)
				if err == nil {
					err = m.Release(ctx, g)
				}
				errs <- err
			}()
		}
		// The waiters sleep, then the file goes and its holder releases.
		for first.lf.pg.waiters.Load() < waiters {
			time.Sleep(50 * time.Microsecond)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		// The file went while held: the release may say so (a waiter
		// may already have made the path's new file).
		if err := first.Release(ctx, g); err != nil && !errors.Is(err, baton.ErrLost) {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: a waiter on the removed file: %v", round, err)
			}
		}
		first.Close()
		for _, m := range ms {
			m.Close()
		}
		os.Remove(path)
	}
}
