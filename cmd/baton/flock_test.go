//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func needFlock(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("flock(1) is not installed (util-linux): %v", err)
		}
		t.Skip("flock(1) is not installed")
	}
}

// flockHolder runs flock(1) on path around a command that says it holds
// and sleeps; it returns once the lock is held, and is killed at the end.
// With -o only flock(1) holds the lock, so killing it frees the file.
func flockHolder(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	c := exec.Command("flock", "-o", path, "sh", "-c", `touch "$0"; exec sleep 60`, ready)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	waitFile(t, ready, 20*time.Second)
	return c
}

// baton and flock(1) exclude each other on one file, both ways.
func TestFlockInterop(t *testing.T) {
	t.Parallel()
	needFlock(t)
	ns := namespace(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "job.lock")
	holder := flockHolder(t, path)
	if r := run(t, ns, "run", "-n", path, "true"); r.code != 1 {
		t.Errorf("baton run -n beside a flock(1) holder: exit %d, stderr %q", r.code, r.stderr)
	}
	r := run(t, ns, "run", "-w", "0.3", "-E", "9", path, "true")
	if r.code != 9 || r.elapsed < 300*time.Millisecond || !strings.Contains(r.stderr, path) {
		t.Errorf("-w 0.3 -E 9: exit %d after %v, stderr %q", r.code, r.elapsed, r.stderr)
	}
	if r := run(t, ns, "run", "-n", "-s", path, "true"); r.code != 1 {
		t.Errorf("-s -n beside an exclusive flock(1) holder: exit %d", r.code)
	}
	_ = holder.Process.Kill()
	_ = holder.Wait()
	// --file takes a relative path; the command waits for a flock(1)
	// user of the file while it runs.
	ready := filepath.Join(dir, "ready")
	c := command(ns, "run", "--file", "job.lock", "sh", "-c", `ls -l /proc/$$/fd > "$0.fds"; touch "$0"; exec sleep 60`, ready)
	c.Dir = dir
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	waitFile(t, ready, 20*time.Second)
	if err := exec.Command("flock", "-n", path, "true").Run(); exitCode(err) != 1 {
		t.Errorf("flock(1) -n beside baton's hold: %v", err)
	}
	// The command inherits no descriptor of the lock (flock's -o).
	if fds, err := os.ReadFile(ready + ".fds"); err != nil || strings.Contains(string(fds), path) {
		t.Errorf("the command's descriptors (%v): %s", err, fds)
	}
	_ = c.Process.Kill()
	_ = c.Wait()
	if err := exec.Command("flock", "-n", path, "true").Run(); err != nil {
		t.Errorf("flock(1) -n after baton died: %v", err)
	}
	// A directory is locked as flock(1) locks it.
	if r := run(t, ns, "run", "-n", dir, "true"); r.code != 0 {
		t.Errorf("a directory: exit %d, stderr %q", r.code, r.stderr)
	}
}

// lock --fd N and -u work on the shell's descriptor, as flock(1) N and
// flock -u N: the lock outlives baton, with the descriptor.
func TestLockFD(t *testing.T) {
	t.Parallel()
	needFlock(t)
	ns := namespace(t)
	path := filepath.Join(t.TempDir(), "fd.lock")
	script := `exec 9>"$1"
"$0" lock --fd 9 || exit 90
flock -n "$1" true; echo "held $?"
"$0" lock -u --fd 9 || exit 91
flock -n "$1" true; echo "free $?"`
	c := command(ns, "x")
	c.Path, c.Args = "/bin/sh", []string{"sh", "-c", script, batonBin, path}
	out, err := c.CombinedOutput()
	if err != nil || string(out) != "held 1\nfree 0\n" {
		t.Errorf("lock --fd then -u: %v, output %q", err, out)
	}
	// -w gives up on a descriptor whose file another holds, and leaves it
	// unlocked: once the holder is gone, the file is free.
	holder := flockHolder(t, path)
	script = `exec 9>"$1"
"$0" lock -w 0.3 --fd 9; echo "busy $?"
kill "$2"
flock -w 10 "$1" true; echo "free $?"`
	c = command(ns, "x")
	c.Path, c.Args = "/bin/sh", []string{"sh", "-c", script, batonBin, path, strconv.Itoa(holder.Process.Pid)}
	out, err = c.CombinedOutput()
	if err != nil || string(out) != "busy 1\nfree 0\n" {
		t.Errorf("lock -w 0.3 --fd on a held file: %v, output %q", err, out)
	}
	for _, bad := range [][]string{{"lock", "-u"}, {"lock", "--fd", "9", "name"}, {"lock", "--fd", "-1"}, {"lock", "--fd", "99"}} {
		if r := run(t, ns, bad...); r.code != exitUsage {
			t.Errorf("baton %q: exit %d, want %d; stderr %q", bad, r.code, exitUsage, r.stderr)
		}
	}
}
