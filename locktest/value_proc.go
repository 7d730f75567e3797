package locktest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// testValueCrossProcess: a Wait wakes on a write by another process, and
// helper processes × handles × goroutines incrementing one counter lose no
// update.
func testValueCrossProcess(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	const procs, handles, goroutines, per = 3, 2, 2, 15
	v, err := b.Value(ctx, name)
	ok(t, "Value", err)
	defer v.Close()
	woke := make(chan error, 1)
	go func() {
		data, ver, err := v.Wait(ctx, 0)
		if err == nil && ver == 0 {
			err = fmt.Errorf("Wait(0) returned version 0")
		}
		if err == nil {
			_, err = parseCounter(data)
		}
		woke <- err
	}()
	time.Sleep(20 * time.Millisecond)
	var ps []*proc
	for range procs {
		ps = append(ps, spawn(t, e, "value-cas", helperArgs{Name: name, Handles: handles, Goroutines: goroutines, Iterations: per}))
	}
	err = result(t, woke, 30*time.Second, "Wait did not wake on a write by another process")
	ok(t, "Wait for a write by another process", err)
	for _, p := range ps {
		p.wait(t)
	}
	if t.Failed() {
		return
	}
	data, _, err := v.Load(ctx)
	ok(t, "Load", err)
	n, err := parseCounter(data)
	ok(t, "final data", err)
	if want := procs * handles * goroutines * per; n != want {
		t.Errorf("counter %d after %d increments by %d processes", n, want, procs)
	}
}

// testValueKill SIGKILLs processes in the middle of CompareAndSwap churn.
// Every Load sees whole data of some write and a version that never goes
// back, and the value stays writable.
func testValueKill(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	v, err := b.Value(ctx, name)
	ok(t, "Value", err)
	defer v.Close()
	var (
		mu       sync.Mutex
		lastVer  uint64 // guarded by mu
		lastN    int    // guarded by mu
		loads    int    // guarded by mu
		stop     = make(chan struct{})
		watchers sync.WaitGroup
	)
	observe := func(what string) {
		// Loads are ordered only if one ends before the next begins.
		mu.Lock()
		defer mu.Unlock()
		data, ver, err := v.Load(ctx)
		if err != nil {
			t.Errorf("%s: Load: %v", what, err)
			return
		}
		n, err := parseCounter(data)
		if err != nil {
			t.Errorf("%s: version %d: %v", what, ver, err)
			return
		}
		if ver < lastVer || n < lastN {
			t.Errorf("%s: version %d count %d after version %d count %d", what, ver, n, lastVer, lastN)
		}
		lastVer, lastN = ver, n
		loads++
	}
	watchers.Add(1)
	go func() {
		defer watchers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			observe("during churn")
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for round := range 6 {
		var ps []*proc
		for range 2 {
			p := spawn(t, e, "value-churn", helperArgs{Name: name, Goroutines: 2})
			p.expect(t, "churning", 30*time.Second)
			ps = append(ps, p)
		}
		for _, p := range ps {
			time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
			ok(t, "kill", p.cmd.Process.Kill())
			_ = p.cmd.Wait()
			observe(fmt.Sprintf("round %d, after a kill", round))
		}
		// Nothing a killed writer held keeps others from writing.
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, _, err := increment(wctx, v)
		cancel()
		ok(t, fmt.Sprintf("round %d: increment after the kills", round), err)
		observe(fmt.Sprintf("round %d, after an increment", round))
	}
	close(stop)
	watchers.Wait()
	mu.Lock()
	t.Logf("count %d, version %d, %d loads", lastN, lastVer, loads)
	mu.Unlock()
}

// helperValue runs the roles of the value tests on a.Name: "value-cas",
// Handles × Goroutines workers that each increment the counter Iterations
// times; "value-churn", Goroutines workers on one handle that increment
// until the process is killed, saying "churning" after the first success.
func helperValue(b baton.Backend, role string, a helperArgs) error {
	ctx := context.Background()
	handles := max(a.Handles, 1)
	var wg sync.WaitGroup
	var once sync.Once
	errs := make(chan error, handles*a.Goroutines)
	for range handles {
		v, err := b.Value(ctx, a.Name)
		if err != nil {
			return err
		}
		defer v.Close()
		for range a.Goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; role == "value-churn" || i < a.Iterations; i++ {
					if _, _, err := increment(ctx, v); err != nil {
						errs <- err
						return
					}
					if role == "value-churn" {
						once.Do(func() { fmt.Println("churning") })
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	return <-errs
}
