package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// The shared setup of the live view's tests: one baton holding a lock and
// one waiting for it, on a fresh namespace, and a futex Mutex that the test
// process holds under an Owner.

// liveScene is a lock held by one baton process while another waits, and
// a Mutex held by this process.
type liveScene struct {
	backend string
	name    string
	pid     int // of the holding baton

	owned string // the name of the Mutex this process holds
	owner string // its Owner, as the Inspector shows it
}

// startLiveScene starts the holder, then the waiter, and returns once the
// backend counts the waiter.
func startLiveScene(t *testing.T) liveScene {
	t.Helper()
	ns := namespace(t)
	s := liveScene{backend: ns, name: "jobs/deploy", owned: "jobs/owned"}
	ready := filepath.Join(t.TempDir(), "ready")
	h := command(ns, "run", s.name, "sh", "-c", `touch "$0"; exec sleep 60`, ready)
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	s.pid = h.Process.Pid
	stopCmd(t, h)
	waitFile(t, ready, 20*time.Second)
	w := command(ns, "run", s.name, "true")
	var errb bytes.Buffer
	w.Stderr = &errb
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	stopCmd(t, w)
	dir := ns[len("local://"):]
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in := b.(baton.Inspector)
	hb, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hb.Close() })
	m, err := hb.Mutex(context.Background(), s.owned)
	if err != nil {
		t.Fatal(err)
	}
	octx := baton.WithOwner(context.Background())
	if _, err := m.Lock(octx); err != nil {
		t.Fatal(err)
	}
	s.owner = strconv.FormatUint(uint64(baton.OwnerOf(octx)), 10)
	info, err := in.Inspect(context.Background(), baton.KindMutex, s.owned)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != s.owner || info.Holders[0].PID != os.Getpid() {
		t.Fatalf("Inspect of %s held by owner %s of pid %d: %+v, %v", s.owned, s.owner, os.Getpid(), info, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		info, err := in.Inspect(context.Background(), baton.KindRWMutex, s.name)
		if err == nil && info.Waiters == 1 && len(info.Holders) == 1 && info.Holders[0].PID == s.pid {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no holder %d and one waiter on %s: %+v, %v; waiter's stderr: %s", s.pid, s.name, info, err, errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopCmd ends c (SIGTERM, then SIGKILL) when the test ends.
func stopCmd(t *testing.T, c *exec.Cmd) {
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	})
}

// needTool returns the path of a program the test needs: in CI a missing
// one is a failure, elsewhere a skip.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (make deps installs it)", name)
		}
		t.Skipf("%s is not installed (make deps installs it)", name)
	}
	return p
}

// docsFile is where a test saves what docs/CLI.md shows, when
// BATON_WRITE_DOCS=1: "" otherwise.
func docsFile(name string) string {
	if os.Getenv("BATON_WRITE_DOCS") != "1" {
		return ""
	}
	return filepath.Join("..", "..", "docs", name)
}
