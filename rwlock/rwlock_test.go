//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package rwlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
	"github.com/batonlock/baton/semaphore"
)

// sysvDriver serves the System V primitives through the baton core, for
// the conformance suite: Mutex and RWMutex by this package (a mutex is the
// write side), Semaphore by package semaphore.
type sysvDriver struct{ ns *ipc.Namespace }

func (d *sysvDriver) Kind() string { return "sysv" }
func (d *sysvDriver) ValidateName(name string) error {
	_, err := ipc.EncodeName(name)
	return err
}
func (d *sysvDriver) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return Open(d.ns, name)
}
func (d *sysvDriver) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return Open(d.ns, name)
}
func (d *sysvDriver) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	return semaphore.Open(d.ns, name, permits)
}
func (d *sysvDriver) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	return nil, fmt.Errorf("sysv: cond: %w", baton.ErrUnsupported)
}
func (d *sysvDriver) Close() error { return nil }

var suite = locktest.Suite{
	Name: "sysv",
	Open: func(cfg string) (baton.Backend, error) {
		ns, err := ipc.OpenNamespace(cfg)
		if err != nil {
			return nil, err
		}
		return baton.NewBackend(&sysvDriver{ns: ns}), nil
	},
	Caps: locktest.Caps{
		RWMutex:      true,
		Semaphore:    true,
		CrossProcess: true,
		KillBound:    500 * time.Millisecond,
		Acquisitions: 5000,
	},
	Objects: func(cfg string) ([]string, error) {
		var out []string
		err := filepath.WalkDir(cfg, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, p)
			}
			return err
		})
		return out, err
	},
}

const (
	envHelper = "BATON_RWTEST_HELPER"
	envDir    = "BATON_RWTEST_DIR"
	envName   = "BATON_RWTEST_NAME"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envHelper); role != "" {
		os.Exit(helper(role))
	}
	locktest.Main(m, suite)
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		t.Fatal(err)
	}
	cleanNS(t, ns)
	locktest.Run(t, suite, dir)
}

// helper runs in a re-executed test binary and reports on stdout.
func helper(role string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ns, err := ipc.OpenNamespace(os.Getenv(envDir))
	if err != nil {
		return fail(err)
	}
	l, err := Open(ns, os.Getenv(envName))
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	switch role {
	case "write", "read":
		mode := driver.Exclusive
		if role == "read" {
			mode = driver.Shared
		}
		if _, err := l.Acquire(ctx, mode); err != nil {
			return fail(err)
		}
		fmt.Println("held")
		time.Sleep(time.Hour)
	case "waitwrite":
		// Waits for the write lock (registering as a waiting writer) and
		// says when it has it; then holds it until told on stdin.
		fmt.Println("waiting")
		g, err := l.Acquire(ctx, driver.Exclusive)
		if err != nil {
			return fail(err)
		}
		fmt.Printf("held %d\n", g.Token)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		if err := l.Release(ctx, g); err != nil {
			return fail(err)
		}
		fmt.Println("released")
		return 0
	}
	return fail(fmt.Errorf("unknown role %q", role))
}

// cleanNS removes the System V objects of ns when the test ends and checks
// that none is left.
func cleanNS(t testing.TB, ns *ipc.Namespace) {
	t.Cleanup(func() {
		recs, err := ipc.List(ns)
		if err != nil {
			t.Errorf("list: %v", err)
		}
		if err := ipc.RemoveAll(ns); err != nil {
			t.Errorf("remove all: %v", err)
		}
		live := sysvIDs(t, "sem")
		for _, r := range recs {
			if k, ok := live[r.ID]; ok && k == r.Key {
				t.Errorf("semaphore set %d of %q left behind", r.ID, r.Name)
			}
		}
		if left, _ := ipc.List(ns); len(left) > 0 {
			t.Errorf("records left: %v", left)
		}
	})
}

func newNS(t testing.TB) *ipc.Namespace {
	t.Helper()
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cleanNS(t, ns)
	return ns
}

func sysvIDs(t testing.TB, kind string) map[int]int32 {
	t.Helper()
	b, err := os.ReadFile("/proc/sysvipc/" + kind)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]int32{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		key, err1 := strconv.ParseInt(f[0], 10, 64)
		id, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil {
			ids[id] = int32(key)
		}
	}
	return ids
}

type proc struct {
	cmd *exec.Cmd
	in  *os.File
	out *bufio.Reader
}

func spawn(t testing.TB, ns *ipc.Namespace, name, role string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+role, envDir+"="+ns.Dir(), envName+"="+name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	p := &proc{cmd: cmd, in: w, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		w.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

func (p *proc) expect(t testing.TB, want string) string {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if !strings.HasPrefix(line, want) {
		t.Fatalf("helper said %q (%v), want %q", line, err, want)
	}
	return strings.TrimSpace(line)
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func open(t testing.TB, ns *ipc.Namespace, name string) *Lock {
	t.Helper()
	l, err := Open(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func values(t testing.TB, ns *ipc.Namespace, name string) [nsems]int {
	t.Helper()
	rec, err := ipc.Lookup(ns, ipc.KindSysvRW, name)
	if err != nil {
		t.Fatal(err)
	}
	set, err := ipc.OpenSemSetID(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	var v [nsems]int
	for i := range v {
		if v[i], err = set.Value(i); err != nil {
			t.Fatal(err)
		}
	}
	return v
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

func TestOpenValidates(t *testing.T) {
	ns := newNS(t)
	for _, n := range []string{"", "/a", "a/../b", "x\x00"} {
		if _, err := Open(ns, n); !errors.Is(err, baton.ErrInvalidName) {
			t.Errorf("Open(%q): %v", n, err)
		}
	}
	for _, e := range []ipc.Entry{{}, ns.Resolve(ipc.KindSysvSem, "a"), ns.Resolve(ipc.KindSysvRW, "")} {
		if _, err := OpenEntry(e); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("OpenEntry(%+v): %v", e, err)
		}
	}
	if names, _ := ns.Names(ipc.KindSysvRW); len(names) != 0 {
		t.Errorf("refused opens left %v", names)
	}
}

// Readers share across processes, writers exclude them and each other.
func TestReadersShareWritersExclude(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	r := spawn(t, ns, "rw", "read")
	r.expect(t, "held")
	l := open(t, ns, "rw")
	g, err := l.TryAcquire(ctx, driver.Shared)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if _, err := open(t, ns, "rw").TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("writer while readers hold: %v", err)
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	r.kill() // the kernel releases the reader's hold
	w, err := l.TryAcquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatalf("writer after the reader died: %v", err)
	}
	other := open(t, ns, "rw")
	if _, err := other.TryAcquire(ctx, driver.Shared); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("reader while a writer holds: %v", err)
	}
	if _, err := other.TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("writer while a writer holds: %v", err)
	}
	in, err := Inspect(ns, "rw")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Holders) != 1 || in.Holders[0].Mode != "exclusive" || in.LastToken != baton.Token(w.Token) ||
		in.Holders[0].PID != os.Getpid() || in.Holders[0].Token != baton.Token(w.Token) {
		t.Fatalf("inspect: %+v (token %d, pid %d)", in, w.Token, os.Getpid())
	}
	if err := l.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	if v := values(t, ns, "rw"); v != [nsems]int{} {
		t.Fatalf("free lock has values %v", v)
	}
}

// A holder SIGKILLed frees the lock; a writer SIGKILLed while waiting is
// taken out of the waiting count, so readers are not blocked by it.
func TestKill(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "k")
	h := spawn(t, ns, "k", "write")
	h.expect(t, "held")
	done := make(chan driver.Grant, 1)
	go func() {
		g, err := l.Acquire(ctx, driver.Exclusive)
		if err != nil {
			t.Error(err)
		}
		done <- g
	}()
	waitFor(t, "writer waiting", func() bool { return values(t, ns, "k")[semWW] == 1 })
	h.kill()
	select {
	case g := <-done:
		if err := l.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("waiter did not get the lock of a killed writer")
	}

	g, err := l.Acquire(ctx, driver.Shared)
	if err != nil {
		t.Fatal(err)
	}
	ww := spawn(t, ns, "k", "waitwrite")
	ww.expect(t, "waiting")
	waitFor(t, "writer registered", func() bool { return values(t, ns, "k")[semWW] == 1 })
	if _, err := open(t, ns, "k").TryAcquire(ctx, driver.Shared); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("new reader while a writer waits: %v", err)
	}
	ww.kill()
	waitFor(t, "killed waiting writer unregistered", func() bool { return values(t, ns, "k")[semWW] == 0 })
	g2, err := open(t, ns, "k").TryAcquire(ctx, driver.Shared)
	if err != nil {
		t.Fatalf("reader after the waiting writer died: %v", err)
	}
	_ = g2
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
}

// Downgrade turns the write lock into a read lock with no gap: a writer
// waiting in another process does not get in until the read lock is
// released.
func TestDowngrade(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "d")
	w, err := l.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ww := spawn(t, ns, "d", "waitwrite")
	ww.expect(t, "waiting")
	waitFor(t, "writer registered", func() bool { return values(t, ns, "d")[semWW] == 1 })
	r, err := l.Downgrade(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if r.Token != w.Token {
		t.Fatalf("downgraded token %d, was %d", r.Token, w.Token)
	}
	if v := values(t, ns, "d"); v != [nsems]int{0, 1, 1} {
		t.Fatalf("after downgrade W,R,WW = %v, want [0 1 1]", v)
	}
	if _, err := open(t, ns, "d").TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("writer after downgrade: %v", err)
	}
	got := make(chan string, 1)
	go func() { line, _ := ww.out.ReadString('\n'); got <- line }()
	select {
	case line := <-got:
		t.Fatalf("waiting writer got in while the downgraded reader holds: %q", line)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := l.Downgrade(ctx, r); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("downgrade of a read grant: %v", err)
	}
	if err := l.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	line := <-got
	tok, _ := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "held "), 10, 64)
	if tok <= uint64(w.Token) {
		t.Fatalf("next writer's token %d, not above %d", tok, w.Token)
	}
	fmt.Fprintln(ww.in)
	ww.expect(t, "released")
}

// A writer gets the lock while readers in other handles keep overlapping
// read holds that would, without writer preference, never leave it free.
func TestWriterNotStarved(t *testing.T) {
	ns := newNS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 4 {
		l := open(t, ns, "s")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				g, err := l.Acquire(ctx, driver.Shared)
				if err != nil {
					return
				}
				reads.Add(1)
				time.Sleep(2 * time.Millisecond)
				_ = l.Release(context.Background(), g)
			}
		}()
	}
	waitFor(t, "readers running", func() bool { return reads.Load() > 20 })
	w := open(t, ns, "s")
	for range 5 {
		t0 := time.Now()
		g, err := w.Acquire(context.Background(), driver.Exclusive)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Since(t0)
		if d > time.Second {
			t.Errorf("writer waited %v behind a stream of readers", d)
		}
		n := reads.Load()
		time.Sleep(5 * time.Millisecond)
		if reads.Load() != n {
			t.Errorf("a reader got in while the writer held")
		}
		if err := w.Release(context.Background(), g); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
}

func TestCancelWaitingWriter(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "c")
	g, err := l.Acquire(ctx, driver.Shared)
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, ns, "c")
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := w.Acquire(cctx, driver.Exclusive); done <- err }()
	waitFor(t, "writer registered", func() bool { return values(t, ns, "c")[semWW] == 1 })
	t0 := time.Now()
	cancel()
	err = <-done
	if d := time.Since(t0); d > 50*time.Millisecond {
		t.Errorf("cancelled writer returned after %v", d)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled writer: %v", err)
	}
	if v := values(t, ns, "c"); v != [nsems]int{0, 1, 0} {
		t.Fatalf("after the cancel W,R,WW = %v, want [0 1 0]", v)
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveWhileHeld(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	l := open(t, ns, "x")
	g, err := l.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(ns, "x"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, g); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("release in a removed set: %v", err)
	}
	g2, err := l.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatalf("acquire after remove: %v", err)
	}
	if g2.Token <= g.Token {
		t.Errorf("token after re-creation %d, not above %d", g2.Token, g.Token)
	}
	if err := l.Release(ctx, g2); err != nil {
		t.Fatal(err)
	}
	infos, err := List(ns)
	if err != nil || len(infos) != 1 || infos[0].Name != "x" {
		t.Fatalf("list: %v %+v", err, infos)
	}
	if err := Remove(ns, "none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove of a missing lock: %v", err)
	}
}
