//go:build linux

package condvar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local/mutex"
	"github.com/batonlock/baton/locktest"
)

// futexDriver serves the futex mutex of ipc and this package's Cond over a
// namespace directory (cfg); it has no RWMutex or Semaphore.
type futexDriver struct{ ns *ipc.Namespace }

func (d futexDriver) Kind() string                   { return "futex" }
func (d futexDriver) ValidateName(name string) error { _, err := ipc.EncodeName(name); return err }
func (d futexDriver) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return mutex.Open(d.ns, name)
}
func (d futexDriver) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return nil, baton.ErrUnsupported
}
func (d futexDriver) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	return nil, baton.ErrUnsupported
}
func (d futexDriver) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	return Open(d.ns, name)
}
func (d futexDriver) Close() error { return nil }

func openBackend(cfg string) (baton.Backend, error) {
	ns, err := ipc.OpenNamespace(cfg)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(futexDriver{ns}), nil
}

var suite = locktest.Suite{
	Name: "futex",
	Open: openBackend,
	Caps: locktest.Caps{
		Cond:         true,
		CrossProcess: true,
		KillBound:    time.Second,
	},
	Objects: func(cfg string) ([]string, error) {
		var out []string
		for _, k := range []string{"futex", Kind} {
			ents, err := os.ReadDir(cfg + "/" + k)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, e := range ents {
				out = append(out, k+"/"+e.Name())
			}
		}
		return out, nil
	},
}

const (
	envRole = "BATON_CONDVAR_TEST_ROLE"
	envDir  = "BATON_CONDVAR_TEST_DIR"
	envN    = "BATON_CONDVAR_TEST_N"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		n, _ := strconv.Atoi(os.Getenv(envN))
		if err := runRole(role, os.Getenv(envDir), n); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	locktest.Main(m, suite)
}

func TestLocktest(t *testing.T) {
	locktest.Run(t, suite, t.TempDir())
}

// queue is the state the producer/consumer test shares, guarded by the
// futex mutex "q".
type queue struct {
	items, produced, consumed, bad atomic.Int64
}

func openQueue(ns *ipc.Namespace) (*queue, *ipc.Region, error) {
	r, err := ipc.OpenRegion(ns, "queue", "q", 64)
	if err != nil {
		return nil, nil, err
	}
	return (*queue)(unsafe.Pointer(&r.Bytes()[0])), r, nil
}

// runRole: "produce" n items (waiting while the queue holds 8) or "consume"
// n items (waiting while it is empty), with one Cond for each condition.
func runRole(role, dir string, n int) error {
	if role == "register" {
		return registerAndSleep(dir, n)
	}
	b, err := openBackend(dir)
	if err != nil {
		return err
	}
	defer b.Close()
	ctx := context.Background()
	m, err := b.Mutex(ctx, "q")
	if err != nil {
		return err
	}
	notEmpty, err := b.Cond(ctx, "notempty")
	if err != nil {
		return err
	}
	notFull, err := b.Cond(ctx, "notfull")
	if err != nil {
		return err
	}
	ns, _ := ipc.OpenNamespace(dir)
	q, r, err := openQueue(ns)
	if err != nil {
		return err
	}
	defer r.Close()
	for range n {
		if _, err := m.Lock(ctx); err != nil {
			return err
		}
		if role == "produce" {
			for q.items.Load() >= 8 {
				if err := notFull.Wait(ctx, m); err != nil {
					return err
				}
			}
			q.items.Add(1)
			q.produced.Add(1)
			err = notEmpty.Signal(ctx)
		} else {
			for q.items.Load() == 0 {
				if err := notEmpty.Wait(ctx, m); err != nil {
					return err
				}
			}
			if q.items.Add(-1) < 0 {
				q.bad.Add(1) // took an item that was not there
			}
			q.consumed.Add(1)
			err = notFull.Signal(ctx)
		}
		if err != nil {
			return err
		}
		if err := m.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

func helper(t testing.TB, role, dir string, n int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+dir, envN+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// TestProducerConsumer: 2 producer and 2 consumer processes hand over
// 100,000 items through a queue of 8; a lost wake-up would hang them. The
// test fails when no item moves for 10 s (a hang), not on total time, which
// depends on the machine's load.
func TestProducerConsumer(t *testing.T) {
	const total = 100_000
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for range 2 {
		cmds = append(cmds, helper(t, "produce", dir, total/2), helper(t, "consume", dir, total/2))
	}
	done := make(chan error, len(cmds))
	for _, c := range cmds {
		go func() { done <- c.Wait() }()
	}
	// Each helper is waited for by its goroutine only: on failure, kill
	// them all and collect those waits.
	fail := func(finished int, format string, args ...any) {
		t.Helper()
		for _, c := range cmds {
			_ = c.Process.Kill()
		}
		for ; finished < len(cmds); finished++ {
			<-done
		}
		t.Fatalf(format, args...)
	}
	var progress func() int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastMove := int64(-1), time.Now()
	for finished := 0; finished < len(cmds); {
		select {
		case err := <-done:
			finished++
			if err != nil {
				fail(finished, "helper: %v", err)
			}
		case <-tick.C:
			if progress == nil {
				ns, err := ipc.OpenNamespace(dir)
				if err != nil {
					continue
				}
				q, r, err := openQueue(ns)
				if err != nil {
					continue // not created yet
				}
				defer r.Close()
				progress = func() int64 { return q.produced.Load() + q.consumed.Load() }
			}
			if p := progress(); p != last {
				last, lastMove = p, time.Now()
			} else if time.Since(lastMove) > 10*time.Second {
				fail(finished, "producers and consumers hung at %d of %d moves: lost wake-up", p, 2*total)
			}
		}
	}
	ns, _ := ipc.OpenNamespace(dir)
	q, r, err := openQueue(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if q.produced.Load() != total || q.consumed.Load() != total || q.items.Load() != 0 || q.bad.Load() != 0 {
		t.Fatalf("produced %d consumed %d left %d bad %d", q.produced.Load(), q.consumed.Load(), q.items.Load(), q.bad.Load())
	}
	// Every handle closed, the condition variables are reclaimed: no
	// file, and so no waiter, is left.
	for _, name := range []string{"notempty", "notfull"} {
		if info, err := Inspect(ns, name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Inspect(%s) = %+v, %v; want it reclaimed", name, info, err)
		}
	}
}

func openCond(t testing.TB, ns *ipc.Namespace, name string) *Cond {
	t.Helper()
	c, err := Open(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSignalExactlyOne: each Signal completes exactly one Wait, oldest
// registration first; Broadcast completes all.
func TestSignalExactlyOne(t *testing.T) {
	ns, _ := ipc.OpenNamespace(t.TempDir())
	c := openCond(t, ns, "c")
	ctx := context.Background()
	if err := c.Signal(ctx); err != nil { // nobody waits: a no-op
		t.Fatal(err)
	}
	const n = 5
	tickets := make([]any, n)
	woke := make(chan int, n)
	for i := range n {
		tk, err := c.Prepare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tickets[i] = tk
		go func() {
			if err := c.Wait(ctx, tk); err != nil {
				t.Error(err)
			}
			woke <- i
		}()
	}
	for want := range 3 {
		if err := c.Signal(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-woke:
			if got != want {
				t.Fatalf("Signal %d woke waiter %d", want, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Signal woke nobody")
		}
		select {
		case got := <-woke:
			t.Fatalf("one Signal woke a second waiter %d", got)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := c.Broadcast(ctx); err != nil {
		t.Fatal(err)
	}
	for range n - 3 {
		select {
		case <-woke:
		case <-time.After(5 * time.Second):
			t.Fatal("Broadcast left a waiter asleep")
		}
	}
	if c.inUse() != 0 {
		t.Fatalf("%d slots in use after every waiter returned", c.inUse())
	}
}

// TestCancelPassesSignalOn: a waiter whose context ends returns promptly and
// holds no slot; a signal it had received goes to the next waiter.
func TestCancelPassesSignalOn(t *testing.T) {
	ns, _ := ipc.OpenNamespace(t.TempDir())
	c := openCond(t, ns, "c")
	ctx := context.Background()
	tk, _ := c.Prepare(ctx)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if err := c.Wait(cctx, tk); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled Wait = %v", err)
	}
	if d := time.Since(t0); d > 60*time.Millisecond {
		t.Fatalf("cancelled Wait returned after %v", d)
	}
	if c.inUse() != 0 {
		t.Fatal("cancelled waiter kept its slot")
	}
	// Signalled, then cancelled before it looked: the signal moves on.
	tk1, _ := c.Prepare(ctx)
	tk2, _ := c.Prepare(ctx)
	c.Signal(ctx) // chooses tk1, the oldest
	c.Cancel(tk1)
	done := make(chan error, 1)
	go func() { done <- c.Wait(ctx, tk2) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the signal of a cancelled waiter was lost")
	}
	// Cancel before waiting withdraws.
	tk3, _ := c.Prepare(ctx)
	c.Cancel(tk3)
	if c.inUse() != 0 {
		t.Fatal("Cancel kept the slot")
	}
}

// TestDeadWaiter: a waiter SIGKILLed while registered does not absorb a
// Signal, whether it was reaped or is a zombie.
func TestDeadWaiter(t *testing.T) {
	for _, reap := range []bool{true, false} {
		t.Run(fmt.Sprintf("reaped=%v", reap), func(t *testing.T) {
			dir := t.TempDir()
			ns, _ := ipc.OpenNamespace(dir)
			c := openCond(t, ns, "notempty")
			cmd := helper(t, "consume", dir, 1) // waits on notempty
			for c.inUse() == 0 {
				time.Sleep(time.Millisecond)
			}
			syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			if reap {
				cmd.Wait()
			} else {
				for {
					if _, st, ok, _ := ipc.LookupProc(cmd.Process.Pid); !ok || st == 'Z' {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			ctx := context.Background()
			tk, err := c.Prepare(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Signal(ctx); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := c.Wait(wctx, tk); err != nil {
				t.Fatalf("live waiter after a dead one: %v (the dead one took the signal)", err)
			}
			if c.inUse() != 0 {
				t.Fatalf("%d slots left", c.inUse())
			}
		})
	}
}

func TestCloseWakesWaiters(t *testing.T) {
	ns, _ := ipc.OpenNamespace(t.TempDir())
	c, err := Open(ns, "c")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 3 {
		tk, _ := c.Prepare(ctx)
		wg.Go(func() {
			if err := c.Wait(ctx, tk); !errors.Is(err, baton.ErrClosed) {
				t.Errorf("Wait on a closed handle = %v", err)
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := c.Signal(ctx); !errors.Is(err, baton.ErrClosed) {
		t.Fatalf("Signal after Close = %v", err)
	}
	if _, err := Open(ns, "../c"); !errors.Is(err, baton.ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
	// Its only handle closed, the condition variable is reclaimed.
	if infos, err := List(ns); err != nil || len(infos) != 0 {
		t.Fatalf("List = %+v, %v; want it reclaimed", infos, err)
	}
	if err := Remove(ns, "c"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove of a reclaimed name = %v", err)
	}
}

// A cancel or a Close that comes just before the waiter sleeps still ends
// the wait: a futex wake alone would be lost there, and the Wait would
// sleep until some later Signal.
func TestWakeNotLost(t *testing.T) {
	ns, _ := ipc.OpenNamespace(t.TempDir())
	ctx := context.Background()
	spin := func(n int) {
		for i := 0; i < n; i++ {
			runtime.Gosched()
		}
	}
	for round := range 3000 {
		c, err := Open(ns, "c")
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		tk, err := c.Prepare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk2, err := c.Prepare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 3)
		go func() { done <- c.Wait(cctx, tk) }()
		go func() { done <- c.Wait(ctx, tk2) }()
		spin(round % 7)
		cancel()
		spin(round % 5)
		go func() { done <- c.Close() }()
		for range 3 {
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, baton.ErrClosed) {
					t.Fatalf("round %d: Wait or Close = %v", round, err)
				}
			case <-time.After(5 * time.Second):
				// Close waits for the Waits to leave.
				buf := make([]byte, 1<<20)
				t.Logf("%s", buf[:runtime.Stack(buf, true)])
				t.Fatalf("round %d: a cancelled or closed Wait still sleeps", round)
			}
		}
	}
}
