//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package ipc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
)

const (
	envSVRole = "BATON_SYSV_TEST_ROLE"
	envSVDir  = "BATON_SYSV_TEST_DIR"
	envSVName = "BATON_SYSV_TEST_NAME"
	envSVN    = "BATON_SYSV_TEST_N"
)

// Helper processes of the System V tests: the test binary re-executed with
// envSVRole set runs the role and exits.
func init() {
	role := os.Getenv(envSVRole)
	if role == "" {
		return
	}
	if err := svRole(role); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func svRole(role string) error {
	ns, err := OpenNamespace(os.Getenv(envSVDir))
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(os.Getenv(envSVN))
	switch role {
	case "send":
		q, err := OpenMsgQueue(ns, os.Getenv(envSVName), 64)
		if err != nil {
			return err
		}
		defer q.Close()
		for i := range n {
			typ := int64(1 + i%3)
			if err := q.Send(context.Background(), typ, []byte(strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

func svHelper(t *testing.T, ns *Namespace, role, name string, n int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envSVRole+"="+role, envSVDir+"="+ns.Dir(), envSVName+"="+name, envSVN+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// sysvSnapshot reads /proc/sysvipc/KIND: id -> key.
func sysvSnapshot(t testing.TB, kind string) map[int]int32 {
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

// sysvNS returns a namespace in a temporary directory; when the test ends
// its System V objects are removed, and none of them, nor any object created
// during the test with a key it recorded, may be left.
func sysvNS(t *testing.T) *Namespace {
	t.Helper()
	ns, err := OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		recs, err := List(ns)
		if err != nil {
			t.Errorf("list: %v", err)
		}
		if err := RemoveAll(ns); err != nil {
			t.Errorf("remove all: %v", err)
		}
		sem, msg := sysvSnapshot(t, "sem"), sysvSnapshot(t, "msg")
		for _, r := range recs {
			live := sem
			if r.Kind == KindMsgQ {
				live = msg
			}
			if k, ok := live[r.ID]; ok && k == r.Key {
				t.Errorf("%s %d of %q left behind", r.Kind, r.ID, r.Name)
			}
		}
		if left, _ := List(ns); len(left) > 0 {
			t.Errorf("records left: %v", left)
		}
	})
	return ns
}

func TestSemSetOps(t *testing.T) {
	set, _, err := CreateSemSet(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Remove() })
	st, err := set.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.OTime != 0 || st.NSems != 2 || st.Mode != 0o600 || st.UID != uint32(os.Geteuid()) {
		t.Fatalf("new set: %+v", st)
	}
	if err := set.TryOp([]SemOp{{Num: 0, Op: 2}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := set.Stat(); st.OTime == 0 {
		t.Fatal("sem_otime still 0 after a semop")
	}
	if err := set.TryOp([]SemOp{{Num: 0, Op: -3}}); !errors.Is(err, ErrWouldBlock) || !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("P(3) of 2: %v", err)
	}
	if err := set.TryOp([]SemOp{{Num: 0, Op: SemValueMax}}); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("past SEMVMX: %v", err)
	}
	if err := set.TryOp([]SemOp{{Num: 5, Op: 1}}); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("index out of range: %v", err)
	}
	if v, _ := set.Value(0); v != 2 {
		t.Fatalf("failed ops changed the value to %d", v)
	}
	if _, err := set.Value(7); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("Value(7): %v", err)
	}
	// A cancelled wait returns promptly and changes nothing.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- set.Op(ctx, []SemOp{{Num: 1, Op: -1, Flags: SemUndo}}) }()
	waitUntil(t, func() bool { n, _, _ := set.Waiting(1); return n == 1 })
	t0 := time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Op: %v", err)
	}
	if d := time.Since(t0); d > 50*time.Millisecond {
		t.Errorf("cancelled Op returned after %v", d)
	}
	// A deadline ends the wait too.
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	if err := set.Op(dctx, []SemOp{{Num: 1, Op: -1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Op past its deadline: %v", err)
	}
	// A waiter wakes when a value lets it through.
	go func() { done <- set.Op(context.Background(), []SemOp{{Num: 1, Op: -1, Flags: SemUndo}}) }()
	waitUntil(t, func() bool { n, _, _ := set.Waiting(1); return n == 1 })
	if err := set.TryOp([]SemOp{{Num: 1, Op: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Removal wakes waiters with ErrRemoved (which matches ErrLost).
	go func() { done <- set.Op(context.Background(), []SemOp{{Num: 1, Op: -1}}) }()
	waitUntil(t, func() bool { n, _, _ := set.Waiting(1); return n == 1 })
	if err := set.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrRemoved) || !errors.Is(err, baton.ErrLost) {
		t.Fatalf("waiter on a removed set: %v", err)
	}
	if _, err := set.Stat(); !errors.Is(err, ErrRemoved) {
		t.Fatalf("stat of a removed set: %v", err)
	}
	if _, _, err := CreateSemSet(0); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("set of 0: %v", err)
	}
}

func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRegistry(t *testing.T) {
	ns := sysvNS(t)
	inits := 0
	init := func(s *SemSet) error { inits++; return s.TryOp([]SemOp{{Num: 0, Op: 3}}) }
	a, err := openSemObject(ns, KindSysvSem, "reg/one", 1, 3, init)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := openSemObject(ns, KindSysvSem, "reg/one", 1, 3, init)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.ID != b.ID || inits != 1 {
		t.Fatalf("second open: ids %d %d, %d inits", a.ID, b.ID, inits)
	}
	if _, err := openSemObject(ns, KindSysvSem, "reg/one", 1, 4, init); !errors.Is(err, baton.ErrMismatch) {
		t.Fatalf("other parameter: %v", err)
	}
	if _, err := openSemObject(ns, KindSysvSem, "../x", 1, 4, init); !errors.Is(err, baton.ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
	// The counter grows and survives a re-creation.
	c1, err := a.NextCounter()
	if err != nil {
		t.Fatal(err)
	}
	if c2, _ := b.NextCounter(); c2 != c1+1 {
		t.Fatalf("counter %d after %d", c2, c1)
	}
	// Removed behind the registry's back: the next open makes a new set.
	if err := a.Sem().Remove(); err != nil {
		t.Fatal(err)
	}
	c, err := openSemObject(ns, KindSysvSem, "reg/one", 1, 3, init)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ID == a.ID || inits != 2 {
		t.Fatalf("after removal: id %d (was %d), %d inits", c.ID, a.ID, inits)
	}
	if v, _ := c.Sem().Value(0); v != 3 {
		t.Fatalf("new set value %d", v)
	}
	if c3, _ := c.Counter(); c3 < c1+1 {
		t.Fatalf("counter went back: %d < %d", c3, c1+1)
	}
	// A set whose creator died before initialising it (sem_otime 0) is
	// replaced, and removed.
	f, err := lockRecord(ns.Resolve(KindSysvSem, "reg/two"), true, unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	dead, key, err := CreateSemSet(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(f, Record{Kind: KindSysvSem, Name: "reg/two", ID: dead.ID(), Key: key, NSems: 1, Param: 3}, 1); err != nil {
		t.Fatal(err)
	}
	unlockRecord(f)
	f.Close()
	d, err := openSemObject(ns, KindSysvSem, "reg/two", 1, 3, init)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.ID == dead.ID() {
		t.Fatal("an uninitialised set was trusted")
	}
	if _, err := dead.Stat(); !errors.Is(err, ErrRemoved) {
		t.Fatalf("uninitialised set not removed: %v", err)
	}
	// A record that names another name is refused.
	path, _ := ns.Path(KindSysvSem, "reg/three")
	f, err = lockRecord(ns.Resolve(KindSysvSem, "reg/three"), true, unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	_ = writeRecord(f, Record{Kind: KindSysvSem, Name: "reg/other", ID: d.ID, Key: d.Key, NSems: 1, Param: 3}, 1)
	unlockRecord(f)
	f.Close()
	if _, err := openSemObject(ns, KindSysvSem, "reg/three", 1, 3, init); !errors.Is(err, baton.ErrMismatch) {
		t.Fatalf("record of another name: %v", err)
	}
	os.Remove(path)
	// Listing and removal.
	recs, err := List(ns)
	if err != nil || len(recs) != 2 {
		t.Fatalf("list: %v %+v", err, recs)
	}
	for _, r := range recs {
		if !r.Alive {
			t.Errorf("%q not alive", r.Name)
		}
	}
	if err := Remove(ns, KindSysvSem, "reg/one"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sem().Stat(); !errors.Is(err, ErrRemoved) {
		t.Fatalf("removed set still there: %v", err)
	}
	if _, err := Lookup(ns, KindSysvSem, "reg/one"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lookup after remove: %v", err)
	}
	if err := Remove(ns, KindSysvSem, "reg/one"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("second remove: %v", err)
	}
	if err := Remove(ns, "flock", "x"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("remove of a kind that is not System V: %v", err)
	}
}

// TestRegistryCreatorKilled: a creator killed after writing the pending
// record (key only) leaves either nothing or an object its key finds; the
// next opener replaces a set and keeps a queue, and Remove removes either.
func TestRegistryCreatorKilled(t *testing.T) {
	ns := sysvNS(t)
	pending := func(kind, name string, nsems int, create bool) (id int, key int32) {
		t.Helper()
		f, err := lockRecord(ns.Resolve(kind, name), true, unix.LOCK_EX)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		defer unlockRecord(f)
		key = randomKey()
		if err := writeRecord(f, Record{Kind: kind, Name: name, ID: pendingID, Key: key, NSems: nsems, Param: 3}, 1); err != nil {
			t.Fatal(err)
		}
		if !create {
			return -1, key
		}
		if kind == KindMsgQ {
			id, err = createMsgQueueKey(key)
		} else {
			id, err = createSemSetKey(key, nsems)
		}
		if err != nil {
			t.Fatal(err)
		}
		return id, key
	}
	init := func(s *SemSet) error { return s.TryOp([]SemOp{{Num: 0, Op: 3}}) }

	// Killed before semget: the opener creates a set.
	pending(KindSysvSem, "k/before", 1, false)
	a, err := openSemObject(ns, KindSysvSem, "k/before", 1, 3, init)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if v, _ := a.Sem().Value(0); v != 3 || a.ID == pendingID {
		t.Fatalf("after a creator killed before semget: id %d value %d", a.ID, v)
	}

	// Killed between semget and the second record write: the orphan set is
	// found by its key, removed, and replaced.
	orphan, _ := pending(KindSysvSem, "k/after", 1, true)
	b, err := openSemObject(ns, KindSysvSem, "k/after", 1, 3, init)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.ID == orphan {
		t.Fatal("the orphan set was trusted")
	}
	if _, err := StatSemSet(orphan); !errors.Is(err, ErrRemoved) {
		t.Fatalf("orphan set not removed: %v", err)
	}

	// The same, found by Remove (baton rm, RemoveAll) instead.
	orphan, _ = pending(KindSysvSem, "k/rm", 1, true)
	if rec, err := Lookup(ns, KindSysvSem, "k/rm"); err != nil || rec.Alive {
		t.Fatalf("lookup of a pending record: %+v %v", rec, err)
	}
	if err := Remove(ns, KindSysvSem, "k/rm"); err != nil {
		t.Fatal(err)
	}
	if _, err := StatSemSet(orphan); !errors.Is(err, ErrRemoved) {
		t.Fatalf("orphan set not removed by Remove: %v", err)
	}

	// A queue needs no initialisation: the opener keeps it and finishes
	// the record.
	q, _ := pending(KindMsgQ, "k/queue", 0, true)
	o, err := openObject(ns, KindMsgQ, "k/queue", 0, 3, msgClass, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.ID != q {
		t.Fatalf("queue %d replaced by %d", q, o.ID)
	}
	if rec, err := Lookup(ns, KindMsgQ, "k/queue"); err != nil || !rec.Alive || rec.ID != q {
		t.Fatalf("record after the opener finished it: %+v %v", rec, err)
	}
}

// openSemObject resolves name and opens its set, as the packages on top do.
func openSemObject(ns *Namespace, kind, name string, nsems int, param int64, init func(*SemSet) error) (*Object, error) {
	e, err := ns.Entry(kind, name)
	if err != nil {
		return nil, err
	}
	return OpenSemObject(e, nsems, param, init)
}
