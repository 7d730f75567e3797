//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package semaphore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
)

const (
	envHelper = "BATON_SEMTEST_HELPER"
	envDir    = "BATON_SEMTEST_DIR"
	envName   = "BATON_SEMTEST_NAME"
	envCap    = "BATON_SEMTEST_CAP"
	envLog    = "BATON_SEMTEST_LOG"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envHelper); role != "" {
		os.Exit(helper(role))
	}
	os.Exit(m.Run())
}

// helper runs in a re-executed test binary.
func helper(role string) int {
	ns, err := ipc.OpenNamespace(os.Getenv(envDir))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	capacity, _ := strconv.ParseInt(os.Getenv(envCap), 10, 64)
	name := os.Getenv(envName)
	ctx := context.Background()
	switch role {
	case "stress":
		// Two goroutines, one handle each, take random 1..3 permits and
		// log when they certainly hold them, until killed.
		log, err := os.OpenFile(os.Getenv(envLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		errc := make(chan error, 2)
		for g := range 2 {
			s, err := Open(ns, name, capacity)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			go func() {
				who := fmt.Sprintf("%d-%d", os.Getpid(), g)
				for {
					n := 1 + rand.Int64N(3)
					gr, err := s.Acquire(ctx, n)
					if err != nil {
						errc <- err
						return
					}
					fmt.Fprintf(log, "S %s %d %d\n", who, n, locktest.Mono())
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
					fmt.Fprintf(log, "E %s %d\n", who, locktest.Mono())
					if err := s.Release(ctx, gr, n); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		fmt.Println("ready")
		err = <-errc
		fmt.Fprintln(os.Stderr, err)
		return 1
	case "hold":
		s, err := Open(ns, name, capacity)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if _, err := s.Acquire(ctx, capacity); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println("held")
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper role", role)
	return 2
}

// newNS returns a namespace in a temporary directory whose System V objects
// are removed when the test ends, and checks that none is left.
func newNS(t testing.TB) *ipc.Namespace {
	t.Helper()
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
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
			if live[r.ID] == r.Key {
				t.Errorf("semaphore set %d of %q left behind", r.ID, r.Name)
			}
		}
		if left, _ := ipc.List(ns); len(left) > 0 {
			t.Errorf("records left: %v", left)
		}
	})
	return ns
}

// sysvIDs reads /proc/sysvipc/KIND: id -> key.
func sysvIDs(t testing.TB, kind string) map[int]int32 {
	t.Helper()
	f, err := os.Open("/proc/sysvipc/" + kind)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[int]int32{}
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		key, err1 := strconv.ParseInt(fs[0], 10, 64)
		id, err2 := strconv.Atoi(fs[1])
		if err1 == nil && err2 == nil {
			ids[id] = int32(key)
		}
	}
	return ids
}

func TestOpenValidates(t *testing.T) {
	ns := newNS(t)
	for _, tc := range []struct {
		name    string
		permits int64
		want    error
	}{
		{"", 1, baton.ErrInvalidName},
		{"../x", 1, baton.ErrInvalidName},
		{"a\x00b", 1, baton.ErrInvalidName},
		{"ok", 0, baton.ErrInvalidArgument},
		{"ok", -3, baton.ErrInvalidArgument},
		{"ok", MaxPermits + 1, baton.ErrInvalidArgument},
	} {
		if _, err := Open(ns, tc.name, tc.permits); !errors.Is(err, tc.want) {
			t.Errorf("Open(%q, %d) = %v, want %v", tc.name, tc.permits, err, tc.want)
		}
	}
	for _, e := range []ipc.Entry{{}, ns.Resolve(ipc.KindSysvRW, "a"), ns.Resolve(ipc.KindSysvSem, "")} {
		if _, err := OpenEntry(e, 1); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("OpenEntry(%+v): %v", e, err)
		}
	}
	if names, _ := ns.Names(ipc.KindSysvSem); len(names) != 0 {
		t.Errorf("refused opens left records %v", names)
	}
	if _, err := Open(nil, "x", 1); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("nil namespace: %v", err)
	}
}

func TestCapacityMismatch(t *testing.T) {
	ns := newNS(t)
	s, err := Open(ns, "pool", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Open(ns, "pool", 4); !errors.Is(err, baton.ErrMismatch) {
		t.Fatalf("open with another capacity: %v, want ErrMismatch", err)
	}
	s2, err := Open(ns, "pool", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Capacity() != 3 {
		t.Fatalf("capacity %d", s2.Capacity())
	}
}

func TestAcquireRelease(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	a, err := Open(ns, "s", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ns, "s", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g2, err := a.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, 2); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryAcquire(2) with 1 free: %v, want ErrLocked", err)
	}
	if _, err := b.TryAcquire(ctx, 4); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("TryAcquire(4) of 3: %v", err)
	}
	g1, err := b.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := a.Available(); v != 0 {
		t.Fatalf("available %d, want 0", v)
	}
	in, err := Inspect(ns, "s")
	if err != nil {
		t.Fatal(err)
	}
	if in.Capacity != 3 || len(in.Holders) != 1 || in.Holders[0].N != 3 || in.Waiters != 0 {
		t.Fatalf("inspect: %+v", in)
	}
	// A waiter is woken by a partial release.
	done := make(chan error, 1)
	go func() {
		g, err := b.Acquire(ctx, 2)
		if err == nil {
			err = b.Release(ctx, g, 2)
		}
		done <- err
	}()
	waitFor(t, func() bool { in, _ := Inspect(ns, "s"); return in.Waiters == 1 })
	if err := a.Release(ctx, g2, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("waiter took 2 permits with 1 free: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := a.Release(ctx, g2, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, g1, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, g1, 2); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("release of more than the grant: %v", err)
	}
	if v, _ := a.Available(); v != 3 {
		t.Fatalf("available %d, want 3", v)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCancel(t *testing.T) {
	ns := newNS(t)
	s, err := Open(ns, "c", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := s.Acquire(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	var lat []time.Duration
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := s.Acquire(ctx, 1); done <- err }()
		waitFor(t, func() bool { in, _ := Inspect(ns, "c"); return in.Waiters == 1 })
		t0 := time.Now()
		cancel()
		err := <-done
		lat = append(lat, time.Since(t0))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v", err)
		}
	}
	slices.Sort(lat)
	t.Logf("cancel latency: median %v, max %v", lat[len(lat)/2], lat[len(lat)-1])
	if lat[len(lat)-1] > 50*time.Millisecond {
		t.Errorf("a cancelled waiter took %v to return", lat[len(lat)-1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline: %v", err)
	}
	if err := s.Release(context.Background(), g, 2); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Available(); v != 2 {
		t.Fatalf("cancelled waiters changed the semaphore: %d free", v)
	}
}

func TestRemoveWhileHeld(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	s, err := Open(ns, "r", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		g, err := s.Acquire(ctx, 1)
		if err == nil {
			err = s.Release(ctx, g, 1)
		}
		done <- err
	}()
	waitFor(t, func() bool { in, _ := Inspect(ns, "r"); return in.Waiters == 1 })
	if err := Remove(ns, "r"); err != nil {
		t.Fatal(err)
	}
	// The waiter moves to the new set, which has its permit free.
	if err := <-done; err != nil {
		t.Fatalf("waiter after remove: %v", err)
	}
	if err := s.Release(ctx, g, 1); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("release in a removed set: %v, want ErrLost", err)
	}
	if err := Remove(ns, "nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove of a missing name: %v", err)
	}
	if _, err := Inspect(ns, "nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("inspect of a missing name: %v", err)
	}
	l, err := List(ns)
	if err != nil || len(l) != 1 || l[0].Name != "r" {
		t.Fatalf("list: %v %+v", err, l)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, 1); !errors.Is(err, baton.ErrClosed) {
		t.Fatalf("acquire on a closed handle: %v", err)
	}
}

type helperProc struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

func spawn(t testing.TB, role string, ns *ipc.Namespace, name string, capacity int64, log string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+role, envDir+"="+ns.Dir(), envName+"="+name,
		envCap+"="+strconv.FormatInt(capacity, 10), envLog+"="+log)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &helperProc{cmd: cmd, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

func (p *helperProc) expect(t testing.TB, want string) {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if strings.TrimSpace(line) != want {
		t.Fatalf("helper said %q (%v), want %q", line, err, want)
	}
}

func (p *helperProc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// lastLineHolds reports whether the last complete line of a stress log is
// an acquisition: the process very likely holds permits.
func lastLineHolds(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return false
	}
	b = b[:len(b)-1]
	if i := strings.LastIndexByte(string(b), '\n'); i >= 0 {
		b = b[i+1:]
	}
	return strings.HasPrefix(string(b), "S ")
}

// TestKillHolders runs 8 processes of 2 goroutines that take random 1..3 of
// 3 permits, and SIGKILLs holders at random: the history never shows more
// than 3 permits held, and once every process is dead the 3 permits are
// free again.
func TestKillHolders(t *testing.T) {
	const (
		capacity = 3
		procs    = 8
		kills    = 16
	)
	ns := newNS(t)
	dir := t.TempDir()
	s, err := Open(ns, "stress", capacity)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	type live struct {
		p   *helperProc
		log string
	}
	seq := 0
	start := func() live {
		seq++
		log := filepath.Join(dir, fmt.Sprintf("h%d.log", seq))
		p := spawn(t, "stress", ns, "stress", capacity, log)
		p.expect(t, "ready")
		return live{p, log}
	}
	killedAt := map[int]int64{} // pid -> Mono before SIGKILL
	var all []live
	running := make([]live, procs)
	for i := range running {
		running[i] = start()
		all = append(all, running[i])
	}
	holdersKilled := 0
	for range kills {
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		// Prefer a process that holds permits.
		pick := rand.IntN(procs)
		for _, i := range rand.Perm(procs) {
			if lastLineHolds(running[i].log) {
				pick = i
				break
			}
		}
		h := running[pick]
		killedAt[h.p.cmd.Process.Pid] = locktest.Mono()
		h.p.kill()
		running[pick] = start()
		all = append(all, running[pick])
	}
	for _, h := range running {
		killedAt[h.p.cmd.Process.Pid] = locktest.Mono()
		h.p.kill()
	}
	// Histories: a hold cut by SIGKILL ends, at the latest, when the kill
	// was sent (the kernel frees its permits after that).
	var recs []locktest.Rec
	for _, h := range all {
		pid := h.p.cmd.Process.Pid
		b, err := os.ReadFile(h.log)
		if err != nil {
			t.Fatal(err)
		}
		open := map[string]locktest.Rec{}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 4 && f[0] == "S":
				n, _ := strconv.ParseInt(f[2], 10, 64)
				ts, _ := strconv.ParseInt(f[3], 10, 64)
				open[f[1]] = locktest.Rec{Start: ts, N: n, Who: f[1]}
			case len(f) == 3 && f[0] == "E":
				r, ok := open[f[1]]
				if !ok {
					continue
				}
				r.End, _ = strconv.ParseInt(f[2], 10, 64)
				recs = append(recs, r)
				delete(open, f[1])
			}
		}
		if len(open) > 0 && killedAt[pid] != 0 {
			holdersKilled++
		}
		for _, r := range open {
			// The kill time is taken just before SIGKILL is sent, and the
			// process may still take a hold in that instant: such a hold is
			// certain only at its start.
			r.End = max(killedAt[pid], r.Start)
			recs = append(recs, r)
		}
	}
	for _, err := range locktest.Check(recs, capacity) {
		t.Error(err)
	}
	t.Logf("%d holds by %d processes, %d killed while holding", len(recs), len(all), holdersKilled)
	// Enough kills must land on holders for the test to mean something;
	// how many do depends on the machine's load.
	if holdersKilled < kills/4 {
		t.Errorf("only %d of %d processes were killed while holding", holdersKilled, len(all))
	}
	if len(recs) < 100 {
		t.Errorf("only %d holds recorded", len(recs))
	}
	if v, err := s.Available(); err != nil || v != capacity {
		t.Fatalf("after every process died: %d permits free (%v), want %d", v, err, capacity)
	}
	g, err := s.TryAcquire(context.Background(), capacity)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(context.Background(), g, capacity); err != nil {
		t.Fatal(err)
	}
}
