//go:build linux

package condvar

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// TestSharedHandleChurn: many goroutines register and wait on one handle
// while Signals keep coming, so that a slot freed by one waiter is claimed
// at once by another. Every Wait must succeed, no slot may be left taken,
// and a lone later waiter must get the next Signal.
func TestSharedHandleChurn(t *testing.T) {
	ns, _ := ipc.OpenNamespace(t.TempDir())
	c := openCond(t, ns, "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const goroutines, rounds = 48, 1000
	var (
		wg   sync.WaitGroup
		left atomic.Int32
		errs atomic.Int32
	)
	left.Store(goroutines)
	for g := range goroutines {
		wg.Go(func() {
			defer left.Add(-1)
			wctx := context.Background()
			if g%2 == 1 {
				wctx = ctx // a cancellable context: Wait sets up its kick
			}
			for range rounds {
				tk, err := c.Prepare(wctx)
				if err != nil {
					t.Error(err)
					return
				}
				if err := c.Wait(wctx, tk); err != nil {
					if errs.Add(1) <= 3 {
						t.Error(err)
					}
				}
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for left.Load() > 0 && time.Now().Before(deadline) {
		if err := c.Signal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if left.Load() > 0 {
		c.Close() // ends the waits that no Signal reached
		wg.Wait()
		t.Fatalf("%d goroutines still waiting after 60 s of Signals", left.Load())
	}
	wg.Wait()
	if errs.Load() > 0 {
		t.Fatalf("%d Waits failed", errs.Load())
	}
	if n, top := c.inUse(), c.top(); n != 0 || top != 0 {
		t.Fatalf("%d slots in use, bound %d, after every Wait returned", n, top)
	}
	if info, err := Inspect(ns, "c"); err != nil || info.Waiters != 0 {
		t.Fatalf("Inspect = %+v, %v; want no waiters", info, err)
	}
	tk, err := c.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := c.Wait(wctx, tk); err != nil {
		t.Fatalf("the only waiter missed the Signal: %v", err)
	}
}

// TestCancelRacesSignal: a waiter whose context ends as it is signalled
// either takes the signal or withdraws; either way its slot is freed, also
// when the cancellation's kick lands as the waiter frees its slot.
func TestCancelRacesSignal(t *testing.T) {
	ns, _ := ipc.OpenNamespace(t.TempDir())
	c := openCond(t, ns, "c")
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for round := range 1500 {
				cctx, cancel := context.WithCancel(ctx)
				tk, err := c.Prepare(ctx)
				if err != nil {
					cancel()
					t.Error(err)
					return
				}
				done := make(chan error, 1)
				go func() { done <- c.Wait(cctx, tk) }()
				var sig sync.WaitGroup
				sig.Go(func() { c.Signal(ctx) })
				cancel()
				sig.Wait()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("round %d: %v", round, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// A signal passed on by a withdrawing waiter may be taken by
	// another's; what must not be left is a slot.
	if n := c.inUse(); n != 0 {
		t.Fatalf("%d slots left in use", n)
	}
}

// done is a context that has ended: Wait on it returns nil for a signalled
// slot and withdraws any other, without sleeping.
func doneCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestCapacity: 4,096 registrations (the whole table) fit, one more is
// refused; Signal picks the oldest, also far up the table, and each Signal
// is consumed once.
func TestCapacity(t *testing.T) {
	ns, _ := ipc.OpenNamespace(t.TempDir())
	c := openCond(t, ns, "c")
	ctx := context.Background()
	n := max(Slots, 4096)
	prepare := func() []any {
		tks := make([]any, n)
		for i := range tks {
			tk, err := c.Prepare(ctx)
			if err != nil {
				t.Fatalf("Prepare %d of %d: %v", i+1, n, err)
			}
			tks[i] = tk
		}
		if _, err := c.Prepare(ctx); !errors.Is(err, baton.ErrUnsupported) {
			t.Fatalf("Prepare beyond %d waiters = %v", n, err)
		}
		return tks
	}

	tks := prepare()
	const signals = 300
	for range signals {
		if err := c.Signal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, tk := range tks {
		err := c.Wait(doneCtx(), tk)
		if i < signals && err != nil {
			t.Fatalf("waiter %d, signalled, got %v", i, err)
		}
		if i >= signals && !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter %d, not signalled, got %v", i, err)
		}
	}
	if n, top := c.inUse(), c.top(); n != 0 || top != 0 {
		t.Fatalf("%d slots in use, bound %d, after every waiter left", n, top)
	}

	// Only the last slot waits: Signal must still look that far.
	tks = prepare()
	for _, tk := range tks[:n-1] {
		c.Cancel(tk)
	}
	if err := c.Signal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(doneCtx(), tks[n-1]); err != nil {
		t.Fatalf("the waiter in the last slot missed the Signal: %v", err)
	}

	tks = prepare()
	if err := c.Broadcast(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tk := range tks {
		if err := c.Wait(doneCtx(), tk); err != nil {
			t.Fatalf("waiter %d after Broadcast: %v", i, err)
		}
	}
	if n := c.inUse(); n != 0 {
		t.Fatalf("%d slots in use after Broadcast", n)
	}
}

// TestManySleepers: more waiters than the table once had, each asleep in
// its own Wait, are woken by one Broadcast.
func TestManySleepers(t *testing.T) {
	ns, _ := ipc.OpenNamespace(t.TempDir())
	c := openCond(t, ns, "c")
	ctx := context.Background()
	const n = 600
	var wg sync.WaitGroup
	var woken atomic.Int32
	for range n {
		tk, err := c.Prepare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := c.Wait(ctx, tk); err != nil {
				t.Error(err)
			}
			woken.Add(1)
		})
	}
	time.Sleep(20 * time.Millisecond)
	if err := c.Broadcast(ctx); err != nil {
		t.Fatal(err)
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		c.Close()
		<-all
		t.Fatalf("Broadcast woke %d of %d", woken.Load(), n)
	}
}

// registerAndSleep is the "register" helper role: n registrations on "c",
// then "ready" on stdout, then sleep until killed.
func registerAndSleep(dir string, n int) error {
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return err
	}
	c, err := Open(ns, "c")
	if err != nil {
		return err
	}
	for range n {
		if _, err := c.Prepare(context.Background()); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	select {}
}

// TestDeadRegistrations: the slots of a process killed while it had many
// registrations are all reclaimed: skipped and freed by Signal, freed by a
// sweep after a Broadcast, and swept by Prepare when they fill the table.
func TestDeadRegistrations(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
	}{{"signal", 300}, {"broadcast", 300}, {"full", Slots}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ns, _ := ipc.OpenNamespace(dir)
			c := openCond(t, ns, "c")
			// The helper says when its last Prepare has returned: a kill
			// in the middle of one may leave a slot that only the sweep
			// of a full table frees.
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envRole+"=register", envDir+"="+dir, envN+"="+strconv.Itoa(tc.n))
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ready := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(out).ReadString('\n')
				ready <- line
			}()
			select {
			case line := <-ready:
				if line != "ready\n" {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the helper failed after %d of %d registrations", c.inUse(), tc.n)
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the helper registered %d of %d in 20 s", c.inUse(), tc.n)
			}
			syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			if n := c.inUse(); n != tc.n {
				t.Fatalf("%d slots in use, want the helper's %d", n, tc.n)
			}
			ctx := context.Background()
			switch tc.name {
			case "signal", "full":
				tk, err := c.Prepare(ctx)
				if err != nil {
					t.Fatalf("Prepare with %d dead registrations: %v", tc.n, err)
				}
				if err := c.Signal(ctx); err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if err := c.Wait(wctx, tk); err != nil {
					t.Fatalf("live waiter behind dead ones: %v", err)
				}
			case "broadcast":
				if err := c.Broadcast(ctx); err != nil {
					t.Fatal(err)
				}
				if err := c.Signal(ctx); err != nil { // finds no waiter: sweeps
					t.Fatal(err)
				}
			}
			if n := c.inUse(); n != 0 {
				t.Fatalf("%d slots of the dead process left", n)
			}
			if info, err := Inspect(ns, "c"); err != nil || info.Waiters != 0 {
				t.Fatalf("Inspect = %+v, %v", info, err)
			}
		})
	}
}
