package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// slotScript counts the commands running at once by themselves: under
// flock(1) on $1 it increments the count in $0 and appends the new value to
// $2, sleeps, then decrements the count.
const slotScript = `flock "$1" sh -c 'n=$(($(cat "$0")+1)); echo $n > "$0"; echo $n >> "$2"' "$0" "$1" "$2"; ` +
	`sleep 0.2; ` +
	`flock "$1" sh -c 'echo $(($(cat "$0")-1)) > "$0"' "$0"`

func testSem(t *testing.T, backend string) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Fatalf("flock(1) is needed to count running commands: %v", err)
	}
	dir := t.TempDir()
	count, lock, log := filepath.Join(dir, "count"), filepath.Join(dir, "lock"), filepath.Join(dir, "log")
	if err := os.WriteFile(count, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n, slots = 10, 3
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = run(t, backend, "sem", "-j", strconv.Itoa(slots), "gpu", "sh", "-c", slotScript, count, lock, log)
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("sem run %d: exit %d, stderr %q", i, r.code, r.stderr)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	vals := strings.Fields(string(b))
	if len(vals) != n {
		t.Fatalf("%d commands ran, want %d: %q", len(vals), n, b)
	}
	highest := 0
	for _, v := range vals {
		k, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		highest = max(highest, k)
	}
	if highest > slots {
		t.Errorf("%d commands ran at once under sem -j %d (log %q)", highest, slots, vals)
	}
	if highest < 2 {
		t.Errorf("never more than %d command at once under sem -j %d: not a semaphore? (log %q)", highest, slots, vals)
	}
	t.Logf("at most %d running at once", highest)

	// Another capacity for the same name is refused while it exists.
	ready := filepath.Join(dir, "ready")
	holder := command(backend, "sem", "-j", "3", "gpu", "sh", "-c", `touch "$0"; exec sleep 60`, ready)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	held := true
	defer func() {
		if held {
			_ = holder.Process.Kill()
			_ = holder.Wait()
		}
	}()
	waitFile(t, ready, 20*time.Second)
	if r := run(t, backend, "sem", "-j", "4", "gpu", "true"); r.code != 64 {
		t.Errorf("sem -j 4 on a semaphore of 3: exit %d, want 64; stderr %q", r.code, r.stderr)
	}
	// --wait waits for every slot: with one held it times out.
	if r := run(t, backend, "sem", "-j", "3", "-w", "0.3", "--wait", "gpu"); r.code != 1 {
		t.Errorf("sem --wait with a slot held: exit %d, want 1; stderr %q", r.code, r.stderr)
	}
	// SIGTERM reaches the command; baton releases the slot when it ends.
	_ = holder.Process.Signal(syscall.SIGTERM)
	if err := waitTimeout(holder, 20*time.Second); exitCode(err) != 143 {
		t.Errorf("holder after SIGTERM: %v, want exit 143", err)
	}
	held = false
	if r := run(t, backend, "sem", "-j", "3", "-w", "10", "--wait", "gpu"); r.code != 0 {
		t.Errorf("sem --wait with every slot free: exit %d; stderr %q", r.code, r.stderr)
	}
}

func TestSemLocal(t *testing.T) {
	t.Parallel()
	testSem(t, namespace(t))
}

func TestSemRedis(t *testing.T) {
	t.Parallel()
	url, _ := startRedis(t)
	testSem(t, url)
}

// TestCounterRedlock: Redlock has no read-write lock; -x takes its Mutex
// and -s is refused.
func TestCounterRedlock(t *testing.T) {
	t.Parallel()
	url := startRedlock(t)
	testCounter(t, url)
	if r := run(t, url, "run", "-s", "counter", "true"); r.code != 70 || !strings.Contains(r.stderr, "unsupported") {
		t.Errorf("-s on Redlock: exit %d, stderr %q; want 70", r.code, r.stderr)
	}
	holder(t, url, "busy")
	if r := run(t, url, "run", "-n", "busy", "true"); r.code != 1 {
		t.Errorf("-n on Redlock against a held lock: exit %d, stderr %q", r.code, r.stderr)
	}
}
