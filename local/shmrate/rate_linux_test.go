//go:build linux

package shmrate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/recipe"
)

var (
	limA = recipe.Limit{Rate: 10, Period: time.Second, Burst: 5}
	limB = recipe.Limit{Rate: 30, Period: 2 * time.Second, Burst: 9}
)

func openNS(t *testing.T) *ipc.Namespace {
	t.Helper()
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func openIn(t *testing.T, ns *ipc.Namespace) *Store {
	t.Helper()
	s, err := OpenEntry(ns.Resolve(Kind, "r"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func step(t *testing.T, s *Store, op recipe.RateOp, lim recipe.Limit, n int64) (recipe.RateOutcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Step(ctx, op, lim, n, time.Time{})
}

// current reads the generation and parameters in force, consistently.
func current(s *Store) (uint64, recipe.Limit) {
	for {
		g := s.word.Load() >> genShift
		if g == 0 {
			return 0, recipe.Limit{}
		}
		if lim, ok := s.params(g); ok {
			return g, lim
		}
	}
}

// Changes of the parameters, from many handles at once while others take
// events, are each applied whole: the parameters in force are at every
// instant one of the limits set, never a mix of two, and every step that
// is served is served on the limit its caller named.
func TestChangeWhole(t *testing.T) {
	ns := openNS(t)
	s := openIn(t, ns)
	if _, err := step(t, s, recipe.RateAllow, limA, 0); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var changes, served atomic.Int64
	for i := range 4 {
		c := openIn(t, ns)
		lim := []recipe.Limit{limA, limB}[i%2]
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := step(t, c, recipe.RateSet, lim, 0); err != nil {
					t.Error(err)
					return
				}
				changes.Add(1)
			}
		})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := step(t, c, recipe.RateReserve, lim, 1)
				if err == nil {
					served.Add(1)
				} else if !errors.Is(err, baton.ErrMismatch) {
					t.Error(err)
					return
				}
			}
		})
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if g, lim := current(s); lim != limA && lim != limB {
			t.Fatalf("generation %d has %+v, neither limit set", g, lim)
		}
	}
	close(stop)
	wg.Wait()
	if changes.Load() < 2 || served.Load() == 0 {
		t.Errorf("%d changes, %d steps served: the test did not race them", changes.Load(), served.Load())
	}
}

// deadOwner returns an owner word naming a process that has exited.
func deadOwner(t *testing.T) uint64 {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return uint64(12345)<<32 | uint64(cmd.Process.Pid)
}

// A changer killed after it claimed the next slot and wrote half of the
// parameters there: the limit in force is untouched (steps on it are
// served, the half-written parameters are refused), and the next change
// takes the slot over and applies whole.
func TestDeadChangerTakenOver(t *testing.T) {
	s := openIn(t, openNS(t))
	if _, err := step(t, s, recipe.RateAllow, limA, 0); err != nil {
		t.Fatal(err)
	}
	g, _ := current(s)
	o := slot(nextGen(g))
	s.u64(o + sOwner).Store(deadOwner(t))
	s.u64(o + sGen).Store(0)
	s.u64(o + sRate).Store(uint64(limB.Rate))
	half := recipe.Limit{Rate: limB.Rate, Period: limA.Period, Burst: limA.Burst}
	if res, err := step(t, s, recipe.RateAllow, limA, 1); err != nil || !res.Allowed {
		t.Fatalf("Allow on the limit in force: %+v, %v", res, err)
	}
	if _, err := step(t, s, recipe.RateAllow, half, 1); !errors.Is(err, baton.ErrMismatch) {
		t.Fatalf("Allow on the half-written parameters: %v, want ErrMismatch", err)
	}
	if _, err := step(t, s, recipe.RateSet, limB, 0); err != nil {
		t.Fatalf("change after a dead changer: %v", err)
	}
	if ng, lim := current(s); ng != nextGen(g) || lim != limB {
		t.Fatalf("after the change: generation %d, %+v; want %d, %+v", ng, lim, nextGen(g), limB)
	}
	if owner := s.u64(o + sOwner).Load(); owner != 0 {
		t.Errorf("the slot's owner word is %#x after the change", owner)
	}
}

// A change waits, asleep, for a live changer of the same slot, and goes
// on once it is done; a change whose context ends meanwhile fails with
// the context's error, having changed nothing.
func TestChangeWaitsForLiveChanger(t *testing.T) {
	s := openIn(t, openNS(t))
	if _, err := step(t, s, recipe.RateAllow, limA, 0); err != nil {
		t.Fatal(err)
	}
	g, _ := current(s)
	owner := s.u64(slot(nextGen(g)) + sOwner)
	// A live process of another tag would be an earlier process of this
	// pid: the parent, alive for the time of the test, stands for it.
	pp, _, ok, err := ipc.LookupProc(os.Getppid())
	if err != nil || !ok {
		t.Skipf("no parent process to stand for a live changer: %v", err)
	}
	live := uint64(pp.Tag())<<32 | uint64(uint32(pp.PID))
	owner.Store(live)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Step(ctx, recipe.RateSet, limB, 0, time.Time{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("change behind a live changer: %v, want the context's error", err)
	}
	if _, lim := current(s); lim != limA {
		t.Fatalf("a cancelled change left %+v", lim)
	}
	done := make(chan error, 1)
	go func() {
		_, err := step(t, s, recipe.RateSet, limB, 0)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	owner.Store(0)
	_, _ = ipc.FutexWake(low(owner), 1<<30)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, lim := current(s); lim != limB {
		t.Fatalf("after the change: %+v", lim)
	}
}

// The file of a limit never stored goes with the last handle; one whose
// parameters are stored stays, with them.
func TestFileKeptOnceStored(t *testing.T) {
	ns := openNS(t)
	path := ns.Resolve(Kind, "r").Path()
	s, err := OpenEntry(ns.Resolve(Kind, "r"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a limit never stored left its file: %v", err)
	}
	s = openIn(t, ns)
	if _, err := step(t, s, recipe.RateAllow, limA, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openIn(t, ns)
	if _, err := step(t, s, recipe.RateAllow, limB, 0); !errors.Is(err, baton.ErrMismatch) {
		t.Fatalf("reopened with another limit: %v, want ErrMismatch", err)
	}
}
