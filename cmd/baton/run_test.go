package main

import (
	"fmt"
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

// counterScript increments the number in the file $0 without any lock of
// its own, slowly enough that two unprotected runs would lose an update.
const counterScript = `n=$(cat "$0"); sleep 0.01; echo $((n+1)) > "$0"`

func testCounter(t *testing.T, backend string) {
	counter := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(counter, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = run(t, backend, "run", "counter", "sh", "-c", counterScript, counter)
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("run %d: exit %d, stderr %q", i, r.code, r.stderr)
		}
	}
	got, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(got)); s != strconv.Itoa(n) {
		t.Fatalf("counter = %s after %d concurrent runs, want %d", s, n, n)
	}
}

func TestCounterLocal(t *testing.T) {
	t.Parallel()
	testCounter(t, namespace(t))
}

func TestCounterRedis(t *testing.T) {
	t.Parallel()
	url, _ := startRedis(t)
	testCounter(t, url)
}

func TestConflict(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	stop := holder(t, ns, "busy")

	r := run(t, ns, "run", "-n", "busy", "true")
	if r.code != 1 {
		t.Errorf("-n against a held lock: exit %d, want 1; stderr %q", r.code, r.stderr)
	}
	if r.elapsed > 3*time.Second {
		t.Errorf("-n took %v", r.elapsed)
	}
	r = run(t, ns, "run", "-n", "-E", "75", "busy", "true")
	if r.code != 75 {
		t.Errorf("-n -E 75: exit %d, want 75; stderr %q", r.code, r.stderr)
	}
	r = run(t, ns, "run", "-w", "0", "-E", "3", "busy", "true")
	if r.code != 3 {
		t.Errorf("-w 0 -E 3: exit %d, want 3; stderr %q", r.code, r.stderr)
	}
	r = run(t, ns, "run", "-w", "0.3", "busy", "true")
	if r.code != 1 {
		t.Errorf("-w 0.3: exit %d, want 1; stderr %q", r.code, r.stderr)
	}
	if r.elapsed < 300*time.Millisecond || r.elapsed > 5*time.Second {
		t.Errorf("-w 0.3 returned after %v", r.elapsed)
	}
	r = run(t, ns, "run", "-w", "300ms", "-s", "busy", "true")
	if r.code != 1 || r.elapsed < 300*time.Millisecond {
		t.Errorf("-w 300ms -s against an exclusive hold: exit %d after %v, want 1 after 300ms", r.code, r.elapsed)
	}

	// SIGTERM to the holder's baton reaches its command (sleep), which
	// dies of it: baton exits 128+15 and the lock is free.
	if code := stop(); code != 143 {
		t.Errorf("holder ended with %d after SIGTERM, want 143", code)
	}
	r = run(t, ns, "run", "-n", "busy", "true")
	if r.code != 0 {
		t.Errorf("-n on a free lock: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestShared(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	holder(t, ns, "rw", "-s")
	if r := run(t, ns, "run", "-n", "-s", "rw", "true"); r.code != 0 {
		t.Errorf("-s -n beside a shared holder: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, ns, "run", "-n", "rw", "true"); r.code != 1 {
		t.Errorf("-x -n beside a shared holder: exit %d, want 1; stderr %q", r.code, r.stderr)
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 255", 255},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	} {
		r := run(t, ns, "run", "st", "sh", "-c", tc.script)
		if r.code != tc.want {
			t.Errorf("sh -c %q: exit %d, want %d; stderr %q", tc.script, r.code, tc.want, r.stderr)
		}
	}
}

func TestEnvAndCommandFlag(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	script := `echo "$BATON_NAME|$BATON_TOKEN|$BATON_BACKEND" > ` + out
	check := func(how string, r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", how, r.code, r.stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("%s: the command did not run: %v", how, err)
		}
		f := strings.Split(strings.TrimSpace(string(b)), "|")
		if len(f) != 3 || f[0] != "env/x" || f[2] != ns {
			t.Fatalf("%s: environment %q, want env/x|TOKEN|%s", how, b, ns)
		}
		if tok, err := strconv.ParseUint(f[1], 10, 64); err != nil || tok == 0 {
			t.Fatalf("%s: BATON_TOKEN %q is not a positive number", how, f[1])
		}
		os.Remove(out)
	}
	check("-c before NAME", run(t, ns, "run", "-c", script, "env/x"))
	check("-c after NAME (flock order)", run(t, ns, "run", "env/x", "-c", script))
	check("exec without shell", run(t, ns, "run", "env/x", "--", "sh", "-c", script))

	// -c goes through $SHELL.
	r := runEnv(t, []string{"SHELL=/bin/sh"}, ns, "run", "-c", `echo "$0"`, "env/x")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "/bin/sh" {
		t.Errorf("-c ran %q (exit %d), want $SHELL=/bin/sh", r.stdout, r.code)
	}
}

// TestClose: the command holds no descriptor of the lock, and a process it
// leaves behind does not keep the lock once baton has ended.
func TestClose(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	dir := t.TempDir()
	fds, bgpid := filepath.Join(dir, "fds"), filepath.Join(dir, "bgpid")
	script := `for f in /proc/$$/fd/*; do readlink "$f"; done > "$0"; ` +
		`sleep 30 </dev/null >/dev/null 2>&1 & echo $! > "$1"`
	for _, flags := range [][]string{{"-o"}, {"--close"}, nil} {
		args := append(append([]string{"run"}, flags...), "leave", "sh", "-c", script, fds, bgpid)
		r := run(t, ns, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", flags, r.code, r.stderr)
		}
		b, err := os.ReadFile(bgpid)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("%v: the background process is gone already: %v", flags, err)
		}
		if r := run(t, ns, "run", "-n", "leave", "true"); r.code != 0 {
			t.Errorf("%v: lock still held after baton ended (the background process keeps it?): exit %d", flags, r.code)
		}
		list, err := os.ReadFile(fds)
		if err != nil {
			t.Fatal(err)
		}
		dirOfNS := strings.TrimPrefix(ns, "local://")
		if strings.Contains(string(list), dirOfNS) {
			t.Errorf("%v: the command inherited a descriptor of the namespace:\n%s", flags, list)
		}
		if len(strings.Fields(string(list))) < 3 {
			t.Errorf("%v: fd listing looks empty: %q", flags, list)
		}
	}
}

func TestSignalForwarded(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	c := command(ns, "run", "sig", "sh", "-c",
		`trap 'echo usr1 > "$1"; exit 5' USR1; touch "$0"; while :; do sleep 0.05; done`, ready, got)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, 20*time.Second)
	if err := c.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	err := waitTimeout(c, 10*time.Second)
	if code := exitCode(err); code != 5 {
		t.Errorf("after SIGUSR1: exit %d (%v), want the command's 5", code, err)
	}
	if b, _ := os.ReadFile(got); strings.TrimSpace(string(b)) != "usr1" {
		t.Errorf("the command did not get SIGUSR1: %q", b)
	}
}

func waitTimeout(c *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = c.Process.Kill()
		<-done
		return fmt.Errorf("did not end within %v", d)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if xe, ok := err.(*exec.ExitError); ok {
		return xe.ExitCode()
	}
	return -1
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	for _, tc := range []struct {
		name string
		env  string // BATON_BACKEND; ns when empty
		args []string
		want string // in the message
	}{
		{"unknown flag", "", []string{"run", "--frobnicate", "x", "true"}, "unknown flag"},
		{"unknown short flag", "", []string{"run", "-Q", "x", "true"}, "unknown shorthand"},
		{"bad duration", "", []string{"run", "-w", "soon", "x", "true"}, "duration"},
		{"negative duration", "", []string{"run", "-w", "-1", "x", "true"}, "negative"},
		{"bad ttl", "", []string{"run", "--ttl", "1fortnight", "x", "true"}, "duration"},
		{"bad grace", "", []string{"run", "--grace", "x", "x", "true"}, "duration"},
		{"bad on-lost", "", []string{"run", "--on-lost", "shrug", "x", "true"}, "on-lost"},
		{"bad -E", "", []string{"run", "-E", "300", "x", "true"}, "0 to 255"},
		{"-s with -x", "", []string{"run", "-s", "-x", "x", "true"}, "-s and -x"},
		{"bad URL scheme", "", []string{"--backend", "ftp://h/x", "run", "x", "true"}, "accepted"},
		{"bad URL env", "zookeeper://h", []string{"run", "x", "true"}, "accepted"},
		{"URL without scheme", "", []string{"--backend", "localhost", "run", "x", "true"}, "accepted"},
		{"relative local dir", "local:relative", []string{"run", "x", "true"}, "absolute"},
		{"bad redis URL", "redlock://h1:1", []string{"run", "x", "true"}, "redlock"},
		{"redlock node twice", "redlock://127.0.0.1:1,127.0.0.1:2,localhost:1", []string{"run", "-n", "x", "true"}, "same node"},
		{"redis port out of range", "redis://127.0.0.1:99999", []string{"run", "-n", "x", "true"}, "port"},
		{"redis ttl 0", "redis://127.0.0.1:1?ttl=0s", []string{"run", "-n", "x", "true"}, "must be > 0"},
		{"redlock node_timeout 0", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=0s", []string{"run", "-n", "x", "true"}, "must be > 0"},
		{"etcd port out of range", "etcd://127.0.0.1:99999", []string{"run", "-n", "x", "true"}, "port"},
		{"postgres ttl 0", "postgres://u@127.0.0.1:1/db?ttl=0s", []string{"run", "-n", "x", "true"}, "must be > 0"},
		{"etcd ttl 0", "etcd://127.0.0.1:1?ttl=0s", []string{"run", "-n", "x", "true"}, "must be > 0"},
		{"etcd ttl not whole seconds", "etcd://127.0.0.1:1?ttl=1500ms", []string{"run", "-n", "x", "true"}, "whole seconds"},
		{"missing command", "", []string{"run", "x"}, "missing command"},
		{"missing command after --", "", []string{"run", "x", "--"}, "missing command"},
		{"missing name", "", []string{"run"}, "missing NAME"},
		{"bad name", "", []string{"run", "a//b", "true"}, "invalid name"},
		{"dot-dot name", "", []string{"run", "../x", "true"}, "invalid name"},
		{"empty name", "", []string{"run", "", "true"}, "invalid name"},
		{"-c with args", "", []string{"run", "-c", "true", "x", "extra"}, "-c"},
		{"sem without -j", "", []string{"sem", "x", "true"}, "-j"},
		{"sem -j 0", "", []string{"sem", "-j", "0", "x", "true"}, "-j"},
		{"sem --wait with command", "", []string{"sem", "-j", "2", "--wait", "x", "true"}, "--wait"},
		{"unknown command", "", []string{"frobnicate", "x"}, "unknown command"},
		{"status without name", "", []string{"status"}, "arg"},
		{"status bad kind", "", []string{"status", "--kind", "widget", "x"}, "--kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == "" {
				env = ns
			}
			r := run(t, env, tc.args...)
			if r.code != 64 {
				t.Errorf("exit %d, want 64; stderr %q", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "baton: ") {
				t.Errorf("stderr is not one 'baton: ...' line: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not mention %q", r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q", r.stdout)
			}
		})
	}
}

func TestCannotExec(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	r := run(t, ns, "run", "x", "/nonexistent/program")
	if r.code != 69 {
		t.Errorf("missing program: exit %d, want 69; stderr %q", r.code, r.stderr)
	}
	notExec := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, ns, "run", "x", notExec)
	if r.code != 69 {
		t.Errorf("not executable: exit %d, want 69; stderr %q", r.code, r.stderr)
	}
	// Nothing was left held.
	if r := run(t, ns, "run", "-n", "x", "true"); r.code != 0 {
		t.Errorf("lock held after a failed exec: exit %d", r.code)
	}
}

func TestHelpAndCompletion(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	r := run(t, ns, "--help")
	for _, want := range []string{"Exit codes", "64", "69", "70", "75", "130", "redis://", "etcd://", "local:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("baton --help lacks %q", want)
		}
	}
	r = run(t, ns, "run", "--help")
	for _, want := range []string{"--nonblock", "--timeout", "--conflict-exit-code", "--command", "--close", "--ttl", "--on-lost", "--grace", "--verbose", "BATON_TOKEN"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("baton run --help lacks %q", want)
		}
	}
	for shell, want := range map[string]string{"bash": "complete -o default", "zsh": "#compdef baton", "fish": "complete -c baton"} {
		r := run(t, ns, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: exit %d, output lacks %q", shell, r.code, want)
		}
	}
}

// TestBatonKilled: when baton dies (SIGKILL), its lock goes with it, and so
// does the command, which the kernel kills.
func TestBatonKilled(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	c := command(ns, "run", "doomed", "sh", "-c", `echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 60`, pidFile)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, pidFile, 20*time.Second)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) outlived baton by 10 s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := run(t, ns, "run", "-n", "doomed", "true"); r.code != 0 {
		t.Errorf("lock held after baton was killed: exit %d, stderr %q", r.code, r.stderr)
	}
}

// alive reports whether pid runs (a zombie is dead).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
