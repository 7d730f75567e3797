//go:build linux

package filelock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

var bg = context.Background()

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(helper(role))
	}
	os.Exit(m.Run())
}

func openMutex(t testing.TB, path string) *Mutex {
	t.Helper()
	m, err := OpenMutex(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func openRW(t testing.TB, dir string) *RWMutex {
	t.Helper()
	rw, err := OpenRWMutex(filepath.Join(dir, "data"), filepath.Join(dir, "gate"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	return rw
}

func mustAcquire(t testing.TB, l driver.Lock, mode driver.Mode) driver.Grant {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	g, err := l.Acquire(ctx, mode)
	if err != nil {
		t.Fatalf("acquire %s: %v", mode, err)
	}
	return g
}

func mustRelease(t testing.TB, l driver.Lock, g driver.Grant) {
	t.Helper()
	if err := l.Release(bg, g); err != nil {
		t.Fatalf("release: %v", err)
	}
}

func wantLocked(t testing.TB, l driver.Lock, mode driver.Mode) {
	t.Helper()
	if g, err := l.TryAcquire(bg, mode); !errors.Is(err, baton.ErrLocked) {
		if err == nil {
			_ = l.Release(bg, g)
		}
		t.Fatalf("TryAcquire %s = %v, want ErrLocked", mode, err)
	}
}

// Two handles on one file exclude each other, and each acquisition gets a
// larger token than the last.
func TestMutexExcludes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m")
	a, b := openMutex(t, p), openMutex(t, p)
	ga := mustAcquire(t, a, driver.Exclusive)
	wantLocked(t, b, driver.Exclusive)
	mustRelease(t, a, ga)
	gb := mustAcquire(t, b, driver.Exclusive)
	if gb.Token <= ga.Token {
		t.Fatalf("token %d after %d", gb.Token, ga.Token)
	}
	wantLocked(t, a, driver.Exclusive)
	st, err := Inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].PID != os.Getpid() || st.Holders[0].Mode != "exclusive" || uint64(st.LastToken) != gb.Token {
		t.Fatalf("inspect while held: %+v", st)
	}
	mustRelease(t, b, gb)
	if st, _ := Inspect(p); len(st.Holders) != 0 {
		t.Fatalf("inspect after release: %+v", st)
	}
}

func TestMutexRefuses(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m")
	m := openMutex(t, p)
	if _, err := m.Acquire(bg, driver.Shared); !errors.Is(err, baton.ErrUnsupported) {
		t.Errorf("shared: %v", err)
	}
	g := mustAcquire(t, m, driver.Exclusive)
	if _, err := m.Downgrade(bg, g); !errors.Is(err, baton.ErrUnsupported) {
		t.Errorf("downgrade: %v", err)
	}
	if err := m.Release(bg, driver.Grant{Data: "other"}); !errors.Is(err, driver.ErrForeignGrant) {
		t.Errorf("foreign grant: %v", err)
	}
	wantLocked(t, openMutex(t, p), driver.Exclusive) // the real hold is still held
	mustRelease(t, m, g)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(bg, driver.Exclusive); !errors.Is(err, baton.ErrClosed) {
		t.Errorf("after close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := OpenMutex(filepath.Join(t.TempDir(), "no", "dir")); err == nil {
		t.Error("opened a file in a missing directory")
	}
}

// Readers share; a writer excludes readers and writers.
func TestRWShareExclude(t *testing.T) {
	dir := t.TempDir()
	r1, r2, w := openRW(t, dir), openRW(t, dir), openRW(t, dir)
	g1 := mustAcquire(t, r1, driver.Shared)
	g2 := mustAcquire(t, r2, driver.Shared)
	wantLocked(t, w, driver.Exclusive)
	mustRelease(t, r1, g1)
	wantLocked(t, w, driver.Exclusive)
	mustRelease(t, r2, g2)
	gw := mustAcquire(t, w, driver.Exclusive)
	wantLocked(t, r1, driver.Shared)
	wantLocked(t, r2, driver.Exclusive)
	mustRelease(t, w, gw)
	g1 = mustAcquire(t, r1, driver.Shared)
	if g1.Token != gw.Token {
		t.Fatalf("reader token %d, last writer's %d", g1.Token, gw.Token)
	}
	mustRelease(t, r1, g1)
}

// A writer waiting for readers to drain keeps new readers out, and gets the
// lock before them.
func TestRWWriterPreferred(t *testing.T) {
	dir := t.TempDir()
	r1, r2, w := openRW(t, dir), openRW(t, dir), openRW(t, dir)
	g1 := mustAcquire(t, r1, driver.Shared)
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var wg sync.WaitGroup
	wg.Go(func() {
		g := mustAcquire(t, w, driver.Exclusive)
		note("writer")
		time.Sleep(20 * time.Millisecond)
		mustRelease(t, w, g)
	})
	// The writer is waiting once it holds the gate: new readers are refused.
	waitFor(t, "the writer to take the gate", func() bool {
		g, err := r2.TryAcquire(bg, driver.Shared)
		if err == nil {
			_ = r2.Release(bg, g)
			return false
		}
		return errors.Is(err, baton.ErrLocked)
	})
	wg.Go(func() {
		g := mustAcquire(t, r2, driver.Shared)
		note("reader")
		mustRelease(t, r2, g)
	})
	time.Sleep(20 * time.Millisecond)
	mustRelease(t, r1, g1)
	wg.Wait()
	if len(order) != 2 || order[0] != "writer" {
		t.Fatalf("order %v, want the writer first", order)
	}
}

// Downgrade leaves no instant in which another writer can take the lock,
// and keeps the token.
func TestRWDowngradeNoGap(t *testing.T) {
	dir := t.TempDir()
	a, b, c := openRW(t, dir), openRW(t, dir), openRW(t, dir)
	var aHolds atomic.Bool
	var slipped, took atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			g, err := b.TryAcquire(bg, driver.Exclusive)
			if err != nil {
				continue
			}
			if aHolds.Load() {
				slipped.Add(1)
			}
			took.Add(1)
			_ = b.Release(bg, g)
		}
	})
	for range 300 {
		g := mustAcquire(t, a, driver.Exclusive)
		aHolds.Store(true)
		sg, err := a.Downgrade(bg, g)
		if err != nil {
			t.Fatal(err)
		}
		if sg.Token != g.Token {
			t.Fatalf("downgrade changed the token: %d to %d", g.Token, sg.Token)
		}
		wantLocked(t, c, driver.Exclusive) // the downgraded hold still keeps writers out
		aHolds.Store(false)
		mustRelease(t, a, sg)
	}
	close(done)
	wg.Wait()
	if n := slipped.Load(); n > 0 {
		t.Fatalf("another writer took the lock %d times while a downgraded hold was held", n)
	}
	if took.Load() == 0 {
		t.Log("the other writer never got in between (test less sharp)")
	}
	g := mustAcquire(t, a, driver.Shared)
	if _, err := a.Downgrade(bg, g); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("downgrade of a shared grant: %v", err)
	}
	mustRelease(t, a, g)
	g = mustAcquire(t, a, driver.Exclusive)
	if err := a.Release(bg, driver.Grant{Data: "other"}); !errors.Is(err, driver.ErrForeignGrant) {
		t.Fatalf("foreign grant: %v", err)
	}
	if st, err := Inspect(filepath.Join(dir, "data")); err != nil || len(st.Holders) != 1 {
		t.Fatalf("the real hold is gone: %+v, %v", st, err)
	}
	wantLocked(t, c, driver.Shared)
	mustRelease(t, a, g)
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached in 5s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Removing the lock file while it is held (or renaming another file over
// it) fires the hold's loss, Release then reports ErrLost, and the handle's
// next acquisition uses the new file.
func TestRemoveWhileHeld(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		kind    string
		open    func() driver.Lock
		path    string
		mode    driver.Mode
		replace bool
	}{
		{"mutex", func() driver.Lock { return openMutex(t, filepath.Join(dir, "m")) }, filepath.Join(dir, "m"), driver.Exclusive, false},
		{"mutex-replaced", func() driver.Lock { return openMutex(t, filepath.Join(dir, "r")) }, filepath.Join(dir, "r"), driver.Exclusive, true},
		{"rw-write", func() driver.Lock { return openRW(t, dir) }, filepath.Join(dir, "data"), driver.Exclusive, false},
		{"rw-read", func() driver.Lock { return openRW(t, dir) }, filepath.Join(dir, "data"), driver.Shared, false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			l := tc.open()
			g := mustAcquire(t, l, tc.mode)
			if g.Loss == nil || g.Loss.Err() != nil {
				t.Fatalf("grant loss %v", g.Loss)
			}
			if tc.replace {
				if err := os.WriteFile(tc.path+".new", nil, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tc.path+".new", tc.path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Remove(tc.path); err != nil {
				t.Fatal(err)
			}
			select {
			case <-g.Loss.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("removal not reported")
			}
			if err := l.Release(bg, g); !errors.Is(err, baton.ErrLost) {
				t.Fatalf("release after removal: %v", err)
			}
			// Another handle opens the new file; this one follows it.
			other := tc.open()
			og := mustAcquire(t, other, driver.Exclusive)
			wantLocked(t, l, tc.mode)
			mustRelease(t, other, og)
			g = mustAcquire(t, l, tc.mode)
			if g.Loss.Err() != nil {
				t.Fatalf("hold on the new file lost: %v", g.Loss.Err())
			}
			mustRelease(t, l, g)
		})
	}
}

// A waiter whose context ends returns promptly with the context's error,
// holds nothing and no longer counts as sleeping on the page.
func TestCancelWaiter(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m")
	a, b := openMutex(t, p), openMutex(t, p)
	ga := mustAcquire(t, a, driver.Exclusive)
	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, driver.Exclusive)
		errc <- err
	}()
	waitFor(t, "the waiter to sleep", func() bool { return a.lf.pg.waiters.Load() > 0 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled waiter still waiting")
	}
	if n := a.lf.pg.waiters.Load(); n != 0 {
		t.Fatalf("%d waiters left on the page", n)
	}
	mustRelease(t, a, ga)
	mustRelease(t, b, mustAcquire(t, b, driver.Exclusive))

	// The same for a reader waiting behind a writer, which waits for the
	// gate, and for a context already done.
	rw, rr := openRW(t, dir), openRW(t, dir)
	gw := mustAcquire(t, rw, driver.Exclusive)
	tctx, tcancel := context.WithTimeout(bg, 30*time.Millisecond)
	defer tcancel()
	if _, err := rr.Acquire(tctx, driver.Shared); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reader past its deadline: %v", err)
	}
	if _, err := rr.Acquire(tctx, driver.Exclusive); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("writer with a done context: %v", err)
	}
	mustRelease(t, rw, gw)
	mustRelease(t, rr, mustAcquire(t, rr, driver.Shared))
}

// Many waiters on their own handles, with cancellations racing releases:
// nobody is left waiting or holding, and the lock is never held twice.
func TestHammerCancel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m")
	var inside atomic.Int32
	var cancelled atomic.Int64
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			m := openMutex(t, p)
			for j := range 150 {
				ctx, cancel := context.WithTimeout(bg, time.Duration((i+j)%4)*time.Millisecond)
				g, err := m.Acquire(ctx, driver.Exclusive)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
						return
					}
					cancelled.Add(1)
					continue
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				if err := m.Release(bg, g); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if cancelled.Load() == 0 {
		t.Error("no wait was cancelled: the test did not race cancellation against release")
	}
	m := openMutex(t, p)
	if n := m.lf.pg.waiters.Load(); n != 0 {
		t.Fatalf("%d waiters left on the page", n)
	}
	mustRelease(t, m, mustAcquire(t, m, driver.Exclusive))
}
