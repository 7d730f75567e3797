//go:build linux

package mutex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// Helper processes: the test binary re-executes itself with these variables
// set; init runs the role and exits before any test starts.
const (
	envRole = "BATON_IPC_TEST_ROLE"
	envDir  = "BATON_IPC_TEST_DIR"
	envName = "BATON_IPC_TEST_NAME"
	envCore = "BATON_IPC_TEST_CORE" // "stress" through the baton core
)

func init() {
	role := os.Getenv(envRole)
	if role == "" {
		return
	}
	err := runRole(role, os.Getenv(envDir), os.Getenv(envName))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runRole(role, dir, name string) error {
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return err
	}
	m, err := Open(ns, name)
	if err != nil {
		return err
	}
	switch role {
	case "hold": // take the lock, say so, and hold it until killed
		g, err := m.Acquire(context.Background(), driver.Exclusive)
		if err != nil {
			return err
		}
		fmt.Printf("held %d\n", g.Token)
		time.Sleep(time.Hour)
	case "stress":
		if os.Getenv(envCore) != "" {
			m.Close()
			return stressCore(ns, name)
		}
		return stressLoop(ns, m)
	case "contend":
		return contendLoop(ns, m)
	}
	return fmt.Errorf("unknown role %q", role)
}

// check is the shared record that stress helpers keep inside the critical
// section, in a region of its own.
type check struct {
	inside, lastToken, count, overlap, badToken, recovered, recoveredAt, stop, holdReq, holderPID atomic.Int64
	target                                                                                        atomic.Int64
}

func openCheck(ns *ipc.Namespace, name string) (*check, *ipc.Region, error) {
	r, err := ipc.OpenRegion(ns, "check", name, 4096)
	if err != nil {
		return nil, nil, err
	}
	return (*check)(unsafe.Pointer(&r.Bytes()[0])), r, nil
}

func stressLoop(ns *ipc.Namespace, m *Mutex) error {
	ctx := context.Background()
	var g driver.Grant
	return stress(ns, func() (tok baton.Token, recovered bool, err error) {
		g, err = m.Acquire(ctx, driver.Exclusive)
		return baton.Token(g.Token), g.Recovered, err
	}, func() error { return m.Release(ctx, g) })
}

// stressCore is stressLoop through the baton core, where an idle lock is
// taken on the word without calling the driver.
func stressCore(ns *ipc.Namespace, name string) error {
	be := baton.NewBackend(coreDriver{ns})
	defer be.Close()
	ctx := context.Background()
	m, err := be.Mutex(ctx, name)
	if err != nil {
		return err
	}
	return stress(ns, func() (baton.Token, bool, error) {
		h, err := m.Lock(ctx)
		return h.Token(), h.Recovered(), err
	}, func() error { return m.Unlock(ctx) })
}

// coreDriver serves futex mutexes of a namespace to the baton core.
type coreDriver struct{ ns *ipc.Namespace }

func (coreDriver) Kind() string                   { return "futex" }
func (coreDriver) ValidateName(name string) error { return nil }
func (d coreDriver) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return Open(d.ns, name)
}
func (coreDriver) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return nil, baton.ErrUnsupported
}
func (coreDriver) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	return nil, baton.ErrUnsupported
}
func (coreDriver) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	return nil, baton.ErrUnsupported
}
func (coreDriver) Close() error { return nil }

// stress takes the lock with lock until told to stop, checking exclusion
// and tokens in the shared record, and holds it when asked to be killed.
// (Nothing is allocated per acquisition: that would lengthen the critical
// section, and with it every kill cycle of the test.)
func stress(ns *ipc.Namespace, lock func() (tok baton.Token, recovered bool, err error), unlock func() error) error {
	c, _, err := openCheck(ns, os.Getenv(envName))
	if err != nil {
		return err
	}
	for c.stop.Load() == 0 {
		tok, recovered, err := lock()
		if err != nil {
			return err
		}
		if recovered {
			// The dead holder may have left its mark; repairing the
			// protected state is what Recovered is for.
			c.inside.Store(0)
			c.recoveredAt.Store(monoNow())
			c.recovered.Add(1)
		}
		if c.inside.Add(1) != 1 {
			c.overlap.Add(1)
		}
		if int64(tok) <= c.lastToken.Load() {
			c.badToken.Add(1)
		}
		c.lastToken.Store(int64(tok))
		c.count.Add(1)
		if c.holdReq.CompareAndSwap(1, 0) {
			// Asked to hold long enough to be killed holding.
			c.holderPID.Store(int64(os.Getpid()))
			time.Sleep(10 * time.Second)
		}
		c.inside.Add(-1)
		if err := unlock(); err != nil {
			return err
		}
	}
	return nil
}

func contendLoop(ns *ipc.Namespace, m *Mutex) error {
	c, _, err := openCheck(ns, os.Getenv(envName))
	if err != nil {
		return err
	}
	ctx := context.Background()
	for c.stop.Load() == 0 {
		g, err := m.Acquire(ctx, driver.Exclusive)
		if err != nil {
			return err
		}
		c.count.Add(1)
		if err := m.Release(ctx, g); err != nil {
			return err
		}
	}
	return nil
}

func helper(t testing.TB, role, dir, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+dir, envName+"="+name)
	cmd.Stderr = os.Stderr
	return cmd
}

func testNS(t testing.TB) *ipc.Namespace {
	t.Helper()
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func openM(t testing.TB, ns *ipc.Namespace, name string) *Mutex {
	t.Helper()
	m, err := Open(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestMutexBasics(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	if _, err := Open(ns, "../x"); !errors.Is(err, baton.ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
	a, b := openM(t, ns, "m"), openM(t, ns, "m")
	if _, err := a.Acquire(ctx, driver.Shared); !errors.Is(err, baton.ErrUnsupported) {
		t.Fatalf("shared mode: %v", err)
	}
	g1, err := a.Acquire(ctx, driver.Exclusive)
	if err != nil || g1.Token != 1 || g1.Recovered {
		t.Fatalf("first acquire: %+v %v", g1, err)
	}
	if _, err := b.TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	if _, err := a.Downgrade(ctx, g1); !errors.Is(err, baton.ErrUnsupported) {
		t.Fatalf("Downgrade: %v", err)
	}
	info, err := Inspect(ns, "m")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].PID != os.Getpid() || info.LastToken != 1 {
		t.Fatalf("Inspect: %+v %v", info, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	t0 := time.Now()
	_, err = b.Acquire(cctx, driver.Exclusive)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 20*time.Millisecond+50*time.Millisecond {
		t.Fatalf("cancelled Acquire: %v after %v", err, time.Since(t0))
	}
	got := make(chan driver.Grant)
	go func() {
		g, err := b.Acquire(ctx, driver.Exclusive)
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	time.Sleep(5 * time.Millisecond)
	if err := a.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	g2 := <-got
	if g2.Token != 2 {
		t.Fatalf("second token %d", g2.Token)
	}
	// A grant that is not the current one is lost, and releasing it
	// changes nothing.
	if err := a.Release(ctx, g1); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("release of a stale grant: %v", err)
	}
	if _, err := a.TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatal("stale release unlocked the holder's lock")
	}
	if err := b.Release(ctx, g2); err != nil {
		t.Fatal(err)
	}
	if g, err := a.TryAcquire(ctx, driver.Exclusive); err != nil || g.Token != 3 {
		t.Fatalf("TryAcquire: %+v %v", g, err)
	} else if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	names, err := List(ns)
	if err != nil || len(names) != 1 || names[0].Name != "m" || len(names[0].Holders) != 0 {
		t.Fatalf("List: %+v %v", names, err)
	}
	a.Close()
	if _, err := a.Acquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if err := Remove(ns, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(ns, "m"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("inspect removed: %v", err)
	}
}

// TestMutexTokensPersist: the fencing counter lives in the file.
func TestMutexTokensPersist(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	m := openM(t, ns, "p")
	for range 3 {
		g, _ := m.Acquire(ctx, driver.Exclusive)
		m.Release(ctx, g)
	}
	m.Close()
	m = openM(t, ns, "p")
	g, err := m.Acquire(ctx, driver.Exclusive)
	if err != nil || g.Token != 4 {
		t.Fatalf("token after reopening: %d %v", g.Token, err)
	}
	m.Release(ctx, g)
}

// TestMutexTokensFollowOn: tokens are one more each time, through the
// driver's releases (waiters flagged or not) and the takeover of a dead
// owner, also where the state's token bits go round and the base moves up.
func TestMutexTokensFollowOn(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	m := openM(t, ns, "seq")
	want := uint64(1)
	for i := range 3*word.TokenRound + 5 {
		g, err := m.Acquire(ctx, driver.Exclusive)
		if err != nil || g.Token != want {
			t.Fatalf("hold %d: %+v %v, want token %d", i, g, err, want)
		}
		if i%3 == 0 {
			// A waiter flag sends the release down the slow path.
			m.state().Store(m.state().Load() | fWaiters)
		}
		if err := m.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
		want++
	}
	// A dead owner (no such pid) holding the last token of a round: its
	// token is want, the taker's the one after.
	base := *m.fence()
	forge(m, pidMaxLinux-1, 1)
	m.state().Store(m.state().Load()&^word.TokenMask | uint64(want-base-1)<<word.TokenShift)
	for range word.TokenRound - int(want-base-1) - 1 {
		want++
		m.state().Store(m.state().Load() + 1<<word.TokenShift)
	}
	if got := m.state().Load() >> word.TokenShift; got != word.TokenRound-1 {
		t.Fatalf("forged token bits %d", got)
	}
	g, err := m.TryAcquire(ctx, driver.Exclusive)
	if err != nil || !g.Recovered || g.Token != want+1 {
		t.Fatalf("takeover: %+v %v, want token %d", g, err, want+1)
	}
	if info, err := Inspect(ns, "seq"); err != nil || info.LastToken != baton.Token(g.Token) || info.Holders[0].Token != baton.Token(g.Token) {
		t.Fatalf("Inspect: %+v %v, want token %d", info, err, g.Token)
	}
	m.Release(ctx, g)
	if g, err := m.Acquire(ctx, driver.Exclusive); err != nil || g.Token != want+2 {
		t.Fatalf("after the takeover: %+v %v, want token %d", g, err, want+2)
	} else {
		m.Release(ctx, g)
	}
}

// TestMutexGoroutines: handles in one process exclude each other.
func TestMutexGoroutines(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	var inside atomic.Int32
	var wg sync.WaitGroup
	var last atomic.Uint64
	for range 4 {
		m := openM(t, ns, "g")
		wg.Go(func() {
			for range 2000 {
				g, err := m.Acquire(ctx, driver.Exclusive)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("overlap")
				}
				if uint64(g.Token) <= last.Load() {
					t.Error("token not increasing")
				}
				last.Store(uint64(g.Token))
				inside.Add(-1)
				if err := m.Release(ctx, g); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// forge writes an owner pattern into the lock word as if pid with tag held it.
func forge(m *Mutex, pid int, tag uint32) {
	m.state().Store(uint64(tag)<<32 | uint64(pid))
}

// TestMutexPIDReuse: a live process whose pid matches the recorded owner
// but whose start time does not is not taken for the owner.
func TestMutexPIDReuse(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	m := openM(t, ns, "reuse")
	self, _ := ipc.Self()
	for _, tc := range []struct {
		what string
		pid  int
		tag  uint32
	}{
		{"our pid, earlier start", self.PID, self.Tag() - 7},
		{"init's pid, other start", 1, 0xdeadbeef},
		{"no such pid", pidMaxLinux - 1, 1},
	} {
		forge(m, tc.pid, tc.tag)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		g, err := m.Acquire(cctx, driver.Exclusive)
		cancel()
		if err != nil || !g.Recovered {
			t.Fatalf("%s: Acquire = %+v, %v; want a recovered grant", tc.what, g, err)
		}
		m.Release(ctx, g)
	}
	// The real owner (alive, right start time) keeps the lock.
	p1, _, ok, _ := ipc.LookupProc(1)
	if !ok {
		t.Skip("no pid 1")
	}
	forge(m, 1, p1.Tag())
	if _, err := m.TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("live owner: TryAcquire = %v", err)
	}
	// The top bits of the high half are token bits, not the start time's.
	forge(m, 1, p1.Tag()^0xff000000)
	if _, err := m.TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("live owner, other token bits: TryAcquire = %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := m.Acquire(cctx, driver.Exclusive); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("live owner: Acquire = %v", err)
	}
	m.state().Store(0)
}

// TestMutexKilledHolder: a holder killed while holding is recovered, also
// while it stays a zombie (not reaped).
func TestMutexKilledHolder(t *testing.T) {
	for _, reap := range []bool{false, true} {
		t.Run(fmt.Sprintf("reaped=%v", reap), func(t *testing.T) {
			ns := testNS(t)
			cmd := helper(t, "hold", ns.Dir(), "k")
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer cmd.Process.Kill()
			buf := make([]byte, 64)
			if n, err := out.Read(buf); err != nil || n == 0 {
				t.Fatalf("helper: %v", err)
			}
			m := openM(t, ns, "k")
			ctx := context.Background()
			if _, err := m.TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
				t.Fatalf("held by a live helper: %v", err)
			}
			cmd.Process.Kill()
			if reap {
				cmd.Wait()
			} else {
				// Let it become a zombie before anyone looks.
				for {
					if _, st, ok, _ := ipc.LookupProc(cmd.Process.Pid); ok && st == 'Z' {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			g, err := m.Acquire(cctx, driver.Exclusive)
			if err != nil || !g.Recovered || g.Token != 2 {
				t.Fatalf("Acquire after the holder died: %+v %v", g, err)
			}
			m.Release(ctx, g)
		})
	}
}

// TestMutexStress: 10^6 acquisitions by 4 processes while holders are
// killed, half of them left unreaped (zombies) until the end; once on the
// driver alone, once through the baton core.
func TestMutexStress(t *testing.T) {
	t.Run("driver", func(t *testing.T) { testMutexStress(t, false) })
	t.Run("core", func(t *testing.T) { testMutexStress(t, true) })
}

func testMutexStress(t *testing.T, core bool) {
	total, wantKills := int64(1_000_000), 30
	if testing.Short() {
		total, wantKills = 100_000, 10
	}
	ns := testNS(t)
	c, r, err := openCheck(ns, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	var procs []*exec.Cmd
	var zombies []*exec.Cmd
	defer func() {
		c.stop.Store(1)
		for _, p := range append(procs, zombies...) {
			p.Process.Kill()
			p.Wait()
		}
	}()
	start := func() {
		cmd := helper(t, "stress", ns.Dir(), "s")
		if core {
			cmd.Env = append(cmd.Env, envCore+"=1")
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	for range 4 {
		start()
	}
	deadline := time.Now().Add(60 * time.Second)
	var lat []time.Duration
	kills := 0
	// A loaded machine may not reach the counts in time: past the
	// deadline the run ends where it is, unless it has stalled.
	last, lastAt := int64(-1), time.Now()
	for c.count.Load() < total || len(lat) < wantKills {
		if n := c.count.Load(); n != last {
			last, lastAt = n, time.Now()
		}
		stalled := time.Since(lastAt) > 5*time.Second
		if stalled || time.Now().After(deadline) && (last < total/10 || len(lat) < wantKills/10) {
			m := openM(t, ns, "s")
			t.Fatalf("%d acquisitions and %d kills, stalled %v; state %#x, %d waiters",
				c.count.Load(), len(lat), stalled, m.state().Load(), m.wait().Load())
		}
		if time.Now().After(deadline) {
			t.Logf("%d acquisitions and %d kills before the deadline; ending there", last, len(lat))
			break
		}
		time.Sleep(5 * time.Millisecond)
		// Ask a holder to stay in the critical section, then kill it.
		c.holderPID.Store(0)
		c.holdReq.Store(1)
		var pid int64
		for wait := time.Now(); time.Since(wait) < 2*time.Second; {
			if pid = c.holderPID.Load(); pid != 0 {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		if pid == 0 {
			c.holdReq.Store(0)
			continue
		}
		i := slices.IndexFunc(procs, func(p *exec.Cmd) bool { return p.Process.Pid == int(pid) })
		if i < 0 {
			t.Fatalf("holder pid %d is no helper", pid)
		}
		rec := c.recovered.Load()
		t0 := monoNow()
		syscall.Kill(int(pid), syscall.SIGKILL)
		kills++
		p := procs[i]
		procs = slices.Delete(procs, i, i+1)
		if kills%2 == 0 {
			zombies = append(zombies, p)
		} else {
			p.Wait()
		}
		// Sometimes kill a random other helper too (a waiter, most likely).
		if rand.IntN(4) == 0 && len(procs) > 0 {
			j := rand.IntN(len(procs))
			procs[j].Process.Kill()
			procs[j].Wait()
			procs = slices.Delete(procs, j, j+1)
			start()
		}
		start()
		for killedAt := time.Now(); c.recovered.Load() == rec; {
			if time.Since(killedAt) > 10*time.Second {
				t.Fatal("killed holder never recovered")
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Duration(c.recoveredAt.Load()-t0))
	}
	c.stop.Store(1)
	for _, p := range procs {
		if err := p.Wait(); err != nil {
			t.Errorf("helper: %v", err)
		}
	}
	procs = nil
	if o, b := c.overlap.Load(), c.badToken.Load(); o != 0 || b != 0 {
		t.Fatalf("%d overlapping holds, %d tokens not increasing", o, b)
	}
	slices.Sort(lat)
	t.Logf("%d acquisitions, %d kills, %d recoveries, %d zombies; kill->hold p50 %v max %v",
		c.count.Load(), kills, c.recovered.Load(), len(zombies), lat[len(lat)/2], lat[len(lat)-1])
}

// Live handles of one name in a process never share handle bits, so the
// word alone tells whose hold it is. Past handleMax live handles a new one is served by
// the driver alone, and a Close of either kind of handle leaves the other's
// hold alone. The bits of an unreachable handle come back.
func TestMutexHandleBits(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	be := baton.NewBackend(coreDriver{ns})
	defer be.Close()
	open := func() baton.Mutex {
		t.Helper()
		m, err := be.Mutex(ctx, "m")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := open() // on the word
	var raw []*Mutex
	seen := map[uint64]bool{}
	defer func() {
		for _, m := range raw {
			m.Close()
		}
	}()
	for {
		m, err := Open(ns, "m")
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, m)
		if wl, _ := m.WordLock(); wl == nil {
			break
		}
		bits := m.me >> handleShift & handleMax
		if bits == 0 || seen[bits] {
			t.Fatalf("handle %d got bits %d, already taken", len(raw), bits)
		}
		seen[bits] = true
		if len(raw) > handleMax {
			t.Fatalf("%d handles on the word", len(raw))
		}
	}
	if len(seen) > handleMax-1 {
		t.Fatalf("%d raw handles on the word beside a core handle, want at most %d", len(seen), handleMax-1)
	}
	held := func(want bool, when string) {
		t.Helper()
		c := open()
		defer c.Close()
		_, err := c.TryLock(ctx)
		switch {
		case want && !errors.Is(err, baton.ErrLocked):
			t.Fatalf("%s: TryLock of another handle: %v, want ErrLocked", when, err)
		case !want && err != nil:
			t.Fatalf("%s: TryLock of another handle: %v", when, err)
		case !want:
			if err := c.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A handle on the word holds; one without bits closes.
	b := open()
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock beside a holder: %v", err)
	}
	if err := b.Unlock(ctx); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("Unlock of a handle that does not hold: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	held(true, "after Close of a handle without bits")
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A handle without bits holds; one on the word closes.
	b = open()
	if _, err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	held(true, "after Close of a handle on the word")
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	held(false, "after Unlock")
	b.Close()
	// Unreachable handles give their bits back.
	for _, m := range raw {
		m.Close()
	}
	raw, a, b = nil, nil, nil
	for deadline := time.Now().Add(10 * time.Second); ; {
		runtime.GC()
		m, err := Open(ns, "m")
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		if wl, _ := m.WordLock(); wl != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no handle bits came back after the handles became unreachable")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Leave the process as the other tests expect it: nearly every field
	// free (cleanups run in the background after a GC).
	probe, err := Open(ns, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	for deadline := time.Now().Add(10 * time.Second); probe.r.FieldsTaken() > 8; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d handle bits still taken after the handles became unreachable", probe.r.FieldsTaken())
		}
		runtime.GC()
	}
}

// TestOpenEntryRefuses: an entry that is unresolved or of another kind is
// refused, and creates nothing.
func TestOpenEntryRefuses(t *testing.T) {
	ns := testNS(t)
	for _, e := range []ipc.Entry{{}, ns.Resolve("cond", "x"), ns.Resolve(Kind, "")} {
		if m, err := OpenEntry(e); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("OpenEntry(%q/%q) = %v, %v; want ErrInvalidArgument", e.Kind(), e.Name(), m, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ns.Dir(), Kind)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("refused opens created %s: %v", Kind, err)
	}
	m, err := OpenEntry(ns.Resolve(Kind, "x"))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// TestHandleBitsPerFile: handle fields are unique per file, not per
// process: a process with more than handleMax handles open, each on a
// name of its own, still serves every one on the word.
func TestHandleBitsPerFile(t *testing.T) {
	ns := testNS(t)
	var ms []*Mutex
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	for i := range 2 * handleMax {
		m, err := Open(ns, fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		if wl, _ := m.WordLock(); wl == nil {
			t.Fatalf("handle %d, on a name of its own, has no word path", i)
		}
	}
}
