package locktest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Tests across processes: the test binary re-executes itself as helpers
// (helper.go), and their histories are merged and checked.

func histPaths(dir string, n int) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = filepath.Join(dir, fmt.Sprintf("hist-%d", i))
	}
	return ps
}

func mergeHistories(t *testing.T, paths []string) []Rec {
	var all []Rec
	for _, p := range paths {
		recs, err := ReadHistory(p)
		ok(t, "read history", err)
		all = append(all, recs...)
	}
	return all
}

func testCrossProcessMutex(t *testing.T, e *env) {
	const procs, handles, goroutines = 4, 2, 2
	per := max(1, e.s.Caps.Acquisitions/(procs*handles*goroutines))
	counter, hs := runLockers(t, e, procs, helperArgs{Handles: handles, Goroutines: goroutines, Iterations: per})
	if t.Failed() {
		return
	}
	total := uint64(procs * handles * goroutines * per)
	got, err := readCounter(counter)
	ok(t, "counter", err)
	if got != total {
		t.Errorf("counter %d after %d acquisitions: %d lost updates", got, total, total-got)
	}
	recs := mergeHistories(t, hs)
	if uint64(len(recs)) != total {
		t.Errorf("%d records, want %d", len(recs), total)
	}
	for _, err := range Check(recs, 0) {
		t.Error(err)
	}
	t.Logf("%d acquisitions by %d processes × %d handles × %d goroutines", total, procs, handles, goroutines)
}

func testCrossProcessRW(t *testing.T, e *env) {
	const procs, handles, goroutines = 3, 2, 2
	per := max(1, e.s.Caps.Acquisitions/4/(procs*handles*goroutines))
	counter, hs := runLockers(t, e, procs, helperArgs{Handles: handles, Goroutines: goroutines, Iterations: per, ReadPercent: 80})
	if t.Failed() {
		return
	}
	recs := mergeHistories(t, hs)
	var writes, reads uint64
	for _, r := range recs {
		if r.Exclusive {
			writes++
		} else {
			reads++
		}
	}
	got, err := readCounter(counter)
	ok(t, "counter", err)
	if got != writes {
		t.Errorf("counter %d after %d writes", got, writes)
	}
	for _, err := range Check(recs, 0) {
		t.Error(err)
	}
	t.Logf("%d reads, %d writes across %d processes", reads, writes, procs)
}

func testCrossProcessSem(t *testing.T, e *env) {
	const procs, handles, goroutines, capacity = 4, 2, 1, 3
	per := max(1, e.s.Caps.Acquisitions/20/(procs*handles*goroutines))
	dir := t.TempDir()
	name := e.name(t)
	hs := histPaths(dir, procs)
	var ps []*proc
	for i := 0; i < procs; i++ {
		ps = append(ps, spawn(t, e, "sem", helperArgs{
			Name: name, Handles: handles, Goroutines: goroutines, Iterations: per,
			History: hs[i], Capacity: capacity, MaxN: capacity,
		}))
	}
	for _, p := range ps {
		p.wait(t)
	}
	if t.Failed() {
		return
	}
	recs := mergeHistories(t, hs)
	for _, err := range Check(recs, capacity) {
		t.Error(err)
	}
	// Every permit is back.
	b := e.open(t)
	s, err := b.Semaphore(context.Background(), name, capacity)
	ok(t, "Semaphore", err)
	_, err = s.TryAcquire(context.Background(), capacity)
	ok(t, "TryAcquire of every permit after the helpers exited", err)
	ok(t, "Release", s.Release(context.Background(), capacity))
}

func testKillHolder(t *testing.T, e *env) {
	ctx := context.Background()
	name := e.name(t)
	b := e.open(t)
	m, err := b.Mutex(ctx, name)
	ok(t, "Mutex", err)
	var took []time.Duration
	for round := 0; round < 5; round++ {
		p := spawn(t, e, "hold", helperArgs{Name: name, Kind: "mutex"})
		p.expect(t, "held", 30*time.Second)
		got := make(chan error, 1)
		var at time.Time
		go func() {
			_, err := m.Lock(ctx)
			at = time.Now()
			got <- err
		}()
		time.Sleep(30 * time.Millisecond)
		t0 := time.Now()
		ok(t, "kill", p.cmd.Process.Kill())
		err = result(t, got, e.s.Caps.KillBound+30*time.Second, "waiter never got the lock of a killed holder")
		ok(t, "Lock after the holder was killed", err)
		_ = p.cmd.Wait()
		took = append(took, at.Sub(t0))
		ok(t, "Unlock", m.Unlock(ctx))
	}
	// The median, so that one scheduling stall of a loaded machine does not
	// decide; the worst is logged.
	slices.Sort(took)
	if med := took[len(took)/2]; med > e.s.Caps.KillBound {
		t.Errorf("holder SIGKILL -> waiter holds: median %v of %v, bound %v", med, took, e.s.Caps.KillBound)
	}
	t.Logf("holder SIGKILL -> waiter holds: median %v, worst %v of %d", took[len(took)/2], took[len(took)-1], len(took))
}

// runLockers runs procs helper processes of role "locker" with a, on a name
// of the test, a shared counter file and a history file each, and waits
// for them to end.
func runLockers(t *testing.T, e *env, procs int, a helperArgs) (counter string, hs []string) {
	dir := t.TempDir()
	a.Name = e.name(t)
	counter = filepath.Join(dir, "counter")
	a.Counter = counter
	hs = histPaths(dir, procs)
	var ps []*proc
	for i := 0; i < procs; i++ {
		a.History = hs[i]
		ps = append(ps, spawn(t, e, "locker", a))
	}
	for _, p := range ps {
		p.wait(t)
	}
	return counter, hs
}
