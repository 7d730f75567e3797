package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// GNU sem's --id, --fg and --bg.
func TestSemGNUForms(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	dir := t.TempDir()
	for _, bad := range [][]string{
		{"sem", "-j", "1", "--fg", "--bg", "s", "true"},
		{"sem", "-j", "1", "--bg", "--wait", "s"},
		{"sem", "-j", "1", "--bg", "s"},
	} {
		if r := run(t, ns, bad...); r.code != exitUsage {
			t.Errorf("baton %q: exit %d, want %d; stderr %q", bad, r.code, exitUsage, r.stderr)
		}
	}
	if r := run(t, ns, "sem", "-j", "2", "--id", "s", "--fg", "sh", "-c", "exit 4"); r.code != 4 {
		t.Errorf("--id --fg: exit %d, stderr %q", r.code, r.stderr)
	}
	started, done := filepath.Join(dir, "started"), filepath.Join(dir, "done")
	// Output to a file: the background baton keeps baton's output open
	// (a pipe would be read to its end only once the command ended).
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	c := command(ns, "sem", "-j", "1", "--bg", "--id", "s1", "sh", "-c", `touch "$0"; sleep 5; touch "$1"`, started, done)
	c.Stdout, c.Stderr = out, out
	start := time.Now()
	if err := c.Run(); err != nil || time.Since(start) > 4*time.Second {
		t.Fatalf("--bg: %v after %v; want success before the command ends", err, time.Since(start))
	}
	waitFile(t, started, 10*time.Second)
	if r := run(t, ns, "sem", "-j", "1", "-n", "s1", "true"); r.code != 1 {
		t.Errorf("-n while a --bg command holds the only slot: exit %d", r.code)
	}
	if r := run(t, ns, "sem", "-j", "1", "-n", "--bg", "s1", "true"); r.code != 1 {
		t.Errorf("-n --bg while busy: exit %d, want the child's 1", r.code)
	}
	if r := run(t, ns, "sem", "-j", "1", "--wait", "s1"); r.code != 0 {
		t.Errorf("--wait: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(done); err != nil {
		t.Errorf("--wait returned before the --bg command ended: %v", err)
	}
}
