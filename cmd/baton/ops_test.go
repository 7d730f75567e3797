package main

import (
	"bufio"
	"bytes"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	r := run(t, "local:", "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "baton version ") || !strings.Contains(r.stdout, "go1.") {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// With standard error not a terminal, a wait that lasts prints what it
// waits for and who holds it, again every --notice-every, and a last line
// when -w gives up.
func TestNoticeWithoutTerminal(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	holder(t, ns, "quiet")
	r := run(t, ns, "run", "-w", "2", "--notice-every", "500ms", "quiet", "true")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 1 || len(lines) < 3 {
		t.Fatalf("-w 2 without a terminal: exit %d, stderr %q; want 1 and notices", r.code, r.stderr)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, `baton: waiting for the exclusive lock "quiet", held by pid `) || strings.Contains(l, "Ctrl-C") {
			t.Errorf("notice %q", l)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"quiet" is busy; gave up after 2`) {
		t.Errorf("last line %q", last)
	}
	// --notice-every 0: once.
	r = run(t, ns, "run", "-w", "1.5", "--notice-every", "0", "quiet", "true")
	if n := strings.Count(r.stderr, "waiting for"); r.code != 1 || n != 1 {
		t.Errorf("--notice-every 0: exit %d, %d notices in %q", r.code, n, r.stderr)
	}
	// -n gives up at once, quietly, as flock does.
	if r := run(t, ns, "run", "-n", "quiet", "true"); r.code != 1 || r.stderr != "" {
		t.Errorf("-n: exit %d, stderr %q", r.code, r.stderr)
	}
}

// startLock starts "baton lock" with stdin a pipe it returns, and returns
// once the token is printed; args "<dev-null>", ... give it /dev/null.
// With stdin nil, the standard input is /dev/null.
func startLock(t *testing.T, backend string, args ...string) (c *exec.Cmd, stdin io.WriteCloser, token uint64, done <-chan int, stderr *bytes.Buffer) {
	t.Helper()
	noStdin := len(args) > 0 && args[0] == "<dev-null>"
	if noStdin {
		args = args[1:]
	}
	c = command(backend, append([]string{"lock"}, args...)...)
	var err error
	if !noStdin {
		if stdin, err = c.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = new(bytes.Buffer)
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("no token: %v, stderr %q", err, stderr)
	}
	token, err = strconv.ParseUint(strings.TrimSpace(line), 10, 64)
	if err != nil || token == 0 {
		t.Fatalf("token line %q", line)
	}
	d := make(chan int, 1)
	go func() {
		_ = c.Wait()
		d <- c.ProcessState.ExitCode()
	}()
	return c, stdin, token, d, stderr
}

func waitExit(t *testing.T, done <-chan int) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("baton lock did not end")
		return -1
	}
}

func TestLockHoldsWithoutCommand(t *testing.T) {
	t.Parallel()
	ns := namespace(t)

	// Held until standard input ends.
	_, stdin, tok, done, _ := startLock(t, ns, "hold/x")
	if r := run(t, ns, "run", "-n", "hold/x", "true"); r.code != 1 {
		t.Errorf("-n while baton lock holds: exit %d", r.code)
	}
	stdin.Close()
	if code := waitExit(t, done); code != 0 {
		t.Errorf("end of stdin: exit %d", code)
	}
	if r := run(t, ns, "run", "-n", "hold/x", "true"); r.code != 0 {
		t.Errorf("-n after the release: exit %d, stderr %q", r.code, r.stderr)
	}

	// With stdin /dev/null (a background job), held until a signal; the
	// tokens go up.
	c, _, tok2, done, _ := startLock(t, ns, "<dev-null>", "hold/x")
	time.Sleep(200 * time.Millisecond)
	if r := run(t, ns, "run", "-n", "hold/x", "true"); r.code != 1 {
		t.Errorf("-n while held with stdin /dev/null: exit %d", r.code)
	}
	if tok2 <= tok {
		t.Errorf("second token %d after %d", tok2, tok)
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, done); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}

	// Busy: the conflict code and nothing on stdout.
	_, stdin, _, _, _ = startLock(t, ns, "hold/y")
	defer stdin.Close()
	if r := run(t, ns, "lock", "-n", "-E", "3", "hold/y"); r.code != 3 || r.stdout != "" {
		t.Errorf("lock -n when busy: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := run(t, ns, "lock", "hold/y", "true"); r.code != 64 {
		t.Errorf("lock with a command: exit %d", r.code)
	}
}

// A hold whose object is removed is lost: baton lock exits 75 and says
// so in one line with one prefix.
func TestLockLost(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	_, stdin, _, done, stderr := startLock(t, ns, "hold/lost")
	defer stdin.Close()
	if r := run(t, ns, "rm", "--force", "hold/lost"); r.code != 0 {
		t.Fatalf("rm --force: exit %d, stderr %q", r.code, r.stderr)
	}
	if code := waitExit(t, done); code != exitLost {
		t.Errorf("lost hold: exit %d, stderr %q", code, stderr)
	}
	if s := stderr.String(); !strings.Contains(s, "was lost") || strings.Count(s, "baton: ") != 1 {
		t.Errorf("message %q, want one line with one prefix", s)
	}
}

func TestRmHeldNeedsForce(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	holder(t, ns, "rm/held")
	r := run(t, ns, "rm", "rm/held")
	if r.code != 1 || !strings.Contains(r.stderr, `"rm/held" is held by pid`) || !strings.Contains(r.stderr, "--force") {
		t.Errorf("rm of a held lock: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, ns, "status", "rm/held"); r.code != 0 {
		t.Errorf("the held lock is gone after rm without --force: exit %d", r.code)
	}
	for _, n := range []string{"rm/a/1", "rm/a/2", "rm/b/1"} {
		if r := run(t, ns, "run", n, "true"); r.code != 0 {
			t.Fatalf("run %s: exit %d", n, r.code)
		}
	}
	// Given back, with no handle open, they are reclaimed: ls shows
	// what exists.
	if r := run(t, ns, "ls"); strings.Contains(r.stdout, "rm/a/") || strings.Contains(r.stdout, "rm/b/") {
		t.Errorf("names given back are still listed: %s", r.stdout)
	}
	for _, n := range []string{"rm/a/1", "rm/a/2", "rm/b/1"} {
		holder(t, ns, n)
	}
	if r := run(t, ns, "rm", "--all", "--force", "rm/a/"); r.code != 0 {
		t.Errorf("rm --all rm/a/: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, ns, "ls")
	if strings.Contains(r.stdout, "rm/a/") || !strings.Contains(r.stdout, "rm/b/1") || !strings.Contains(r.stdout, "rm/held") {
		t.Errorf("after rm --all rm/a/: %s", r.stdout)
	}
	if r := run(t, ns, "rm", "--all", "rm/zzz"); r.code != 1 || !strings.Contains(r.stderr, "no object") {
		t.Errorf("rm --all of no match: exit %d, stderr %q", r.code, r.stderr)
	}
	// Everything: the held one stays without --force, goes with it.
	if r := run(t, ns, "rm", "--all", ""); r.code != 1 || !strings.Contains(r.stderr, "rm/held") {
		t.Errorf("rm --all '': exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, ns, "rm", "--all", "--force", ""); r.code != 0 {
		t.Errorf("rm --all --force '': exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, ns, "ls", "--json"); strings.Contains(r.stdout, `"name"`) {
		t.Errorf("objects left: %s", r.stdout)
	}
}

func TestParseJobs(t *testing.T) {
	for in, want := range map[string]int64{"4": 4, "1": 1, "+0": 4, "+2": 6, "-1": 3, "-10": 1, "50%": 2, "1%": 1, "200%": 8, "100%": 4} {
		if got, err := parseJobs(in, 4); err != nil || got != want {
			t.Errorf("parseJobs(%q, 4) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "", "x", "+", "-", "-x", "%", "0%", "+-1", "--1", "1.5", "-1%", "+1%", "9999999999%"} {
		if got, err := parseJobs(in, 4); err == nil {
			t.Errorf("parseJobs(%q) = %d, want an error", in, got)
		}
	}
}

func TestSemJobsForms(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	semHolder(t, ns, "+0", "jobs/cpus")
	r := run(t, ns, "status", "--json", "jobs/cpus")
	if want := `"capacity": ` + strconv.Itoa(numCPU()); !strings.Contains(r.stdout, want) {
		t.Errorf("-j +0 made %s, want %s", r.stdout, want)
	}
	for _, j := range []string{"0", "abc", "0%"} {
		if r := run(t, ns, "sem", "-j", j, "jobs/bad", "true"); r.code != 64 || strings.Count(r.stderr, "baton: ") != 1 {
			t.Errorf("-j %s: exit %d, stderr %q", j, r.code, r.stderr)
		}
	}
}

// numCPU is the number of CPUs baton sees, which the child inherits.
func numCPU() int {
	n, _ := strconv.Atoi(strings.TrimSpace(runOut("nproc")))
	return n
}

func runOut(name string, args ...string) string {
	out, _ := exec.Command(name, args...).Output()
	return string(out)
}

// Errors carry one "baton: " prefix, whatever the cause's text.
func TestOnePrefix(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"etcd://h?foo=1", "redis://127.0.0.1:1?ttl=0s", "nope://x", "local:rel"} {
		r := run(t, u, "run", "x", "true")
		if r.code != 64 || strings.Count(r.stderr, "baton: ") != 1 {
			t.Errorf("%s: exit %d, stderr %q", u, r.code, r.stderr)
		}
	}
}
