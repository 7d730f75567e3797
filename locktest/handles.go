package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Tests of many handles of one Backend on one name. Where the driver is a
// driver.Passer the core queues their goroutines in one line and passes
// holds among the handles with no server call; on other backends the
// handles simply contend, and the same properties hold.

// manyRun is how long the many-handle tests hammer.
const manyRun = 600 * time.Millisecond

// testManyHandles: two Backends with 4 handles × 4 goroutines each lock
// one name, a fifth of them with a context cancelled at a random moment
// (racing the Unlock that would let them in). Holds never overlap, tokens
// strictly increase, and no handle is starved: the handles of one Backend
// pass holds among themselves (where the driver is a driver.Passer) and
// still let the other Backend in. (testLockCancelRace checks that a
// cancelled Lock holds nothing.) A share is judged over a short run: a
// loaded machine can keep one handle's threads off the CPU for most of it,
// so a starved share counts only if it is starved in each of three runs.
func testManyHandles(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	bs := []baton.Backend{b, e.open(t)}
	for try := 1; ; try++ {
		starved := manyHandlesRun(t, ctx, bs, name)
		if starved == "" || t.Failed() {
			break
		}
		if try == 3 {
			t.Errorf("%s in each of %d runs", starved, try)
			break
		}
		t.Logf("%s; again", starved)
	}
	// The name is free at the end.
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	defer m.Close()
	ok(t, "TryLock at the end", soon(func() error { _, err := m.TryLock(ctx); return err }))
	ok(t, "Unlock", m.Unlock(ctx))
}

// manyHandlesRun is one run of testManyHandles; it returns what starved,
// if a handle was.
func manyHandlesRun(t *testing.T, ctx context.Context, bs []baton.Backend, name string) (starved string) {
	const handles, goroutines = 8, 4
	var (
		hist   History
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts [handles]int // guarded by mu
	)
	ms := make([]baton.Mutex, handles)
	for i := range ms {
		var err error
		ms[i], err = bs[i%2].Mutex(ctx, name)
		ok(t, "Mutex", err)
		defer ms[i].Close()
	}
	stop := time.Now().Add(manyRun)
	for i, m := range ms {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := fmt.Sprintf("h%d/g%d", i, g)
				for time.Now().Before(stop) {
					lctx, cancel := context.WithCancel(ctx)
					if rand.IntN(5) == 0 {
						time.AfterFunc(time.Duration(rand.IntN(300))*time.Microsecond, cancel)
					}
					hd, err := m.Lock(lctx)
					if err != nil {
						cancel()
						if !errors.Is(err, context.Canceled) {
							t.Errorf("%s: Lock: %v", who, err)
							return
						}
						continue
					}
					start := Mono()
					end := Mono()
					hist.Add(Rec{Start: start, End: end, Exclusive: true, Token: uint64(hd.Token()), N: 1, Who: who})
					mu.Lock()
					counts[i]++
					mu.Unlock()
					if err := m.Unlock(ctx); err != nil {
						t.Errorf("%s: Unlock: %v", who, err)
					}
					cancel()
				}
			}()
		}
	}
	wg.Wait()
	recs := hist.Records()
	for _, err := range Check(recs, 0) {
		t.Error(err)
	}
	total := len(recs)
	least := slices.Min(counts[:])
	t.Logf("%d holds; per handle %v", total, counts)
	if least == 0 || least < total/handles/10 {
		return fmt.Sprintf("a handle got %d of %d holds (per handle %v): starved", least, total, counts)
	}
	return ""
}

// testCloseWhilePassing: handles are opened and closed while their
// goroutines and those of longer-lived handles lock one name. Every Lock
// returns a hold or ErrClosed, holds that ended with a successful Unlock
// never overlap (Close gives back the holds of its handle, and then
// another may hold), and at the end the name is free.
func testCloseWhilePassing(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	var (
		hist History
		wg   sync.WaitGroup
	)
	stop := time.Now().Add(manyRun)
	work := func(m baton.Mutex, who string) {
		defer wg.Done()
		for time.Now().Before(stop) {
			hd, err := m.Lock(ctx)
			if errors.Is(err, baton.ErrClosed) {
				return
			}
			if err != nil {
				t.Errorf("%s: Lock: %v", who, err)
				return
			}
			r := Rec{Start: Mono(), Exclusive: true, Token: uint64(hd.Token()), N: 1, Who: who}
			r.End = Mono()
			err = m.Unlock(ctx)
			switch {
			case err == nil:
				hist.Add(r)
			case !errors.Is(err, baton.ErrClosed):
				t.Errorf("%s: Unlock: %v", who, err)
				return
			}
		}
	}
	for i := range 3 {
		m, err := b.Mutex(ctx, name)
		ok(t, "Mutex", err)
		defer m.Close()
		for g := range 2 {
			wg.Add(1)
			go work(m, fmt.Sprintf("h%d/g%d", i, g))
		}
	}
	closed := 0
	for time.Now().Before(stop) {
		m, err := b.Mutex(ctx, name)
		ok(t, "Mutex", err)
		for g := range 3 {
			wg.Add(1)
			go work(m, fmt.Sprintf("c%d/g%d", closed, g))
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		ok(t, "Close", m.Close())
		closed++
	}
	wg.Wait()
	recs := hist.Records()
	// Tokens are not checked: the hold of a closed handle may have been
	// cut short, and its record is missing, but its token is not reused.
	for _, err := range Check(recs, 0) {
		t.Error(err)
	}
	t.Logf("%d handles closed, %d holds", closed, len(recs))
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	defer m.Close()
	ok(t, "TryLock at the end", soon(func() error { _, err := m.TryLock(ctx); return err }))
	ok(t, "Unlock", m.Unlock(ctx))
}
