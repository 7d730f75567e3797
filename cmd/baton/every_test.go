package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAtMostEvery(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	job := "echo ran >> " + marks
	for _, bad := range [][]string{
		{"run", "--at-most-every", "0", "job", "true"},
		{"run", "--max-run", "1s", "job", "true"},
		{"run", "--at-most-every", "1h", "-s", "job", "true"},
		{"run", "--at-most-every", "1h", "--max-run", "0", "job", "true"},
	} {
		if r := run(t, ns, bad...); r.code != exitUsage {
			t.Errorf("baton %q: exit %d, want %d; stderr %q", bad, r.code, exitUsage, r.stderr)
		}
	}
	if _, err := os.Stat(marks); err == nil {
		t.Fatalf("a refused invocation ran its command")
	}
	r := run(t, ns, "run", "--at-most-every", "1h", "job", "sh", "-c", job)
	if r.code != 0 {
		t.Fatalf("first run: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, ns, "run", "-v", "--at-most-every", "1h", "job", "sh", "-c", job)
	if r.code != 0 || !strings.Contains(r.stderr, "skipped") {
		t.Errorf("second run within the hour: exit %d, stderr %q; want 0 and a skip said", r.code, r.stderr)
	}
	r = run(t, ns, "run", "-E", "3", "--at-most-every", "1h", "job", "sh", "-c", job)
	if r.code != 3 {
		t.Errorf("a skip with -E 3: exit %d", r.code)
	}
	if b, _ := os.ReadFile(marks); string(b) != "ran\n" {
		t.Errorf("the job ran %q, want once", b)
	}
	// Exit status passes through; a short interval lets the next run in.
	r = run(t, ns, "run", "--at-most-every", "200ms", "short", "sh", "-c", "exit 7")
	if r.code != 7 {
		t.Errorf("exit 7: baton exit %d, stderr %q", r.code, r.stderr)
	}
	time.Sleep(300 * time.Millisecond)
	if r = run(t, ns, "run", "--at-most-every", "200ms", "short", "true"); r.code != 0 {
		t.Errorf("a run after the interval: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A hung run is given up at --max-run: SIGTERM, SIGKILL after --grace,
// exit 75, and the next run may start.
func TestAtMostEveryMaxRun(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	r := run(t, ns, "run", "--at-most-every", "100ms", "--max-run", "500ms", "--grace", "200ms", "hang",
		"sh", "-c", "trap '' TERM; sleep 30")
	if r.code != exitLost || !strings.Contains(r.stderr, "given up") {
		t.Errorf("a hung run: exit %d, stderr %q; want %d", r.code, r.stderr, exitLost)
	}
	if r.elapsed < 500*time.Millisecond || r.elapsed > 10*time.Second {
		t.Errorf("a hung run ended after %v", r.elapsed)
	}
	if r = run(t, ns, "run", "--at-most-every", "100ms", "hang", "true"); r.code != 0 {
		t.Errorf("the next run: exit %d, stderr %q", r.code, r.stderr)
	}
}
