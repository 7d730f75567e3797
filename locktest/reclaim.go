package locktest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Reclaim describes how a backend gives back the state of idle names, for
// the tests of reclaim: tokens keep increasing across it, many distinct
// names leave no more state than there was before, and a reclaim racing
// new handles and locks of the same name never makes two holders.
type Reclaim struct {
	// Residue counts the backend's state (keys, rows, znodes) at cfg.
	Residue func(cfg string) (int, error)
	// After: the state of a name is gone within this of its last Close
	// (0: at once).
	After time.Duration
	// Names is the number of distinct names of the residue test (0: 2,000;
	// the environment variable BATON_LOCKTEST_RECLAIM_NAMES overrides it).
	Names int
	// NoSemaphore: the backend keeps a semaphore's state (its capacity)
	// after it went idle, so the residue test uses none.
	NoSemaphore bool
}

// reclaimWait waits until the residue is at most base and returns the
// time that took; it fails t when that takes longer than After plus slack.
func (e *env) reclaimWait(t *testing.T, base int) time.Duration {
	t.Helper()
	r := e.s.Reclaim
	t0 := time.Now()
	deadline := t0.Add(r.After + 10*time.Second)
	for {
		n, err := r.Residue(e.cfg)
		ok(t, "Residue", err)
		if n <= base {
			return time.Since(t0)
		}
		if time.Now().After(deadline) {
			t.Fatalf("residue %d, was %d before: not reclaimed %v after the last Close", n, base, time.Since(t0))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) residue(t *testing.T) int {
	t.Helper()
	n, err := e.s.Reclaim.Residue(e.cfg)
	ok(t, "Residue", err)
	return n
}

// testReclaimTokens: a name's tokens increase across the reclaim of its
// state, after holds taken on the server and holds passed among the
// handles of one Backend (which may use reserved tokens).
func testReclaimTokens(t *testing.T, e *env) {
	ctx := context.Background()
	base := e.residue(t)
	for _, rw := range []bool{false, true} {
		if rw && !e.s.Caps.RWMutex {
			continue
		}
		name := e.name(t)
		b := e.open(t)
		var hi baton.Token
		var mu sync.Mutex
		var wg sync.WaitGroup
		for h := 0; h < 2; h++ {
			m, err := openMutex(ctx, b, name, rw)
			ok(t, "open", err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer m.Close()
				for i := 0; i < 50; i++ {
					hd, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					hi = max(hi, hd.Token())
					mu.Unlock()
					if err := m.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		took := e.reclaimWait(t, base)
		m, err := openMutex(ctx, b, name, rw)
		ok(t, "open after reclaim", err)
		hd, err := m.Lock(ctx)
		ok(t, "Lock after reclaim", err)
		if hd.Token() <= hi {
			t.Errorf("rw=%t: token %d after reclaim, not above %d before", rw, hd.Token(), hi)
		}
		ok(t, "Unlock", m.Unlock(ctx))
		ok(t, "Close", m.Close())
		t.Logf("rw=%t: highest token %d, reclaimed in %v, then %d", rw, hi, took.Round(time.Millisecond), hd.Token())
	}
}

// testReclaimResidue: after Lock, Unlock and Close of many distinct names
// (and some RWMutex and Semaphore names), the backend keeps no more state
// than before, once After has passed.
func testReclaimResidue(t *testing.T, e *env) {
	ctx := context.Background()
	n := e.s.Reclaim.Names
	if v, err := strconv.Atoi(os.Getenv("BATON_LOCKTEST_RECLAIM_NAMES")); err == nil && v > 0 {
		n = v // to measure with more names than a test run uses
	}
	if n == 0 {
		n = 2000
	}
	base := e.residue(t)
	b := e.open(t)
	prefix := e.name(t)
	const workers = 8
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				sem := e.s.Caps.Semaphore && !e.s.Reclaim.NoSemaphore
				if err := useName(ctx, b, e.s.Caps.RWMutex, sem, fmt.Sprintf("%s-%d", prefix, i), i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	peak := e.residue(t)
	took := e.reclaimWait(t, base)
	// What the Inspector lists (baton ls) is what exists: none of them.
	if in, isIn := b.(baton.Inspector); isIn {
		infos, err := in.List(ctx)
		ok(t, "List", err)
		for _, info := range infos {
			if strings.HasPrefix(info.Name, prefix+"-") {
				t.Errorf("List shows %s %q after it was reclaimed", info.Kind, info.Name)
				break
			}
		}
	}
	t.Logf("%d names: residue %d before, %d after the last Close, back to at most %d in %v (bound checked: no more than before)",
		n, base, peak, base, took.Round(time.Millisecond))
}

// useName takes and gives back the name once: a Mutex, and for every tenth
// name an RWMutex (read) or a Semaphore when rw or sem is set.
func useName(ctx context.Context, b baton.Backend, rw, sem bool, name string, i int) error {
	if i%10 == 1 && rw {
		m, err := b.RWMutex(ctx, name)
		if err != nil {
			return err
		}
		defer m.Close()
		if _, err := m.RLock(ctx); err != nil {
			return err
		}
		if err := m.RUnlock(ctx); err != nil {
			return err
		}
	}
	if i%10 == 2 && sem {
		s, err := b.Semaphore(ctx, name, 2)
		if err != nil {
			return err
		}
		defer s.Close()
		if _, err := s.Acquire(ctx, 1); err != nil {
			return err
		}
		if err := s.Release(ctx, 1); err != nil {
			return err
		}
	}
	m, err := b.Mutex(ctx, name)
	if err != nil {
		return err
	}
	if _, err := m.Lock(ctx); err != nil {
		m.Close()
		return err
	}
	if err := m.Unlock(ctx); err != nil {
		m.Close()
		return err
	}
	return m.Close()
}

// testReclaimRace: processes open, lock, unlock and close handles of a few
// names, one name at a time in turn, each name idle for about After between
// its turns, so that its state is reclaimed while new handles open and lock
// it (on a backend that reclaims at once, at every release that leaves the
// name free). Per name: no overlap, tokens increasing in start order.
func testReclaimRace(t *testing.T, e *env) {
	const procs, goroutines, nnames = 4, 3, 3
	window := max(e.s.Reclaim.After/2, 500*time.Millisecond)
	runFor := max(2*window*nnames, 6*time.Second)
	names := make([]string, nnames)
	for i := range names {
		names[i] = e.name(t)
	}
	hs := histPaths(t.TempDir(), procs)
	var ps []*proc
	for i := 0; i < procs; i++ {
		ps = append(ps, spawn(t, e, "reclaim", helperArgs{
			Name: strings.Join(names, ","), Goroutines: goroutines, History: hs[i],
			HoldFor: runFor, Window: window,
		}))
	}
	for _, p := range ps {
		p.wait(t)
	}
	if t.Failed() {
		return
	}
	byName := map[string][]Rec{}
	for _, r := range mergeHistories(t, hs) {
		name, _, _ := strings.Cut(r.Who, "/")
		byName[name] = append(byName[name], r)
	}
	for _, name := range names {
		recs := byName[name]
		if len(recs) == 0 {
			t.Errorf("%s: never held", name)
		}
		for _, err := range Check(recs, 0) {
			t.Errorf("%s: %v", name, err)
		}
		t.Logf("%s: %d holds", name, len(recs))
	}
}

// helperReclaim is the worker of testReclaimRace: for HoldFor, in turns of
// Window, every goroutine opens a handle of the turn's name (the names are
// comma-separated in Name), locks, unlocks and closes it, and starts each
// turn after a random part of the window so that opens meet the reclaim.
func helperReclaim(b baton.Backend, a helperArgs) error {
	ctx := context.Background()
	names := strings.Split(a.Name, ",")
	var hist History
	var wg sync.WaitGroup
	errs := make(chan error, a.Goroutines)
	end := time.Now().Add(a.HoldFor)
	for g := 0; g < a.Goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for now := time.Now(); now.Before(end); now = time.Now() {
				turn := now.UnixNano() / int64(a.Window)
				name := names[turn%int64(len(names))]
				time.Sleep(rand.N(a.Window / 4))
				turnEnd := time.Unix(0, (turn+1)*int64(a.Window))
				for time.Now().Before(turnEnd) {
					if err := lockOnce(ctx, b, name, fmt.Sprintf("%s/p%d/g%d", name, os.Getpid(), g), &hist); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	return finishHistory(&wg, errs, a.History, &hist)
}

// lockOnce opens a Mutex handle of name, locks, records the hold, unlocks
// and closes the handle.
func lockOnce(ctx context.Context, b baton.Backend, name, who string, hist *History) error {
	m, err := b.Mutex(ctx, name)
	if err != nil {
		return err
	}
	defer m.Close()
	hd, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	start := Mono()
	end := Mono()
	hist.Add(Rec{Start: start, End: end, Exclusive: true, Token: uint64(hd.Token()), N: 1, Who: who})
	if err := m.Unlock(ctx); err != nil {
		return err
	}
	return m.Close()
}
