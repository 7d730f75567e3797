package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestQueueCommands(t *testing.T) {
	ns := namespace(t)
	for _, c := range []struct {
		args []string
		out  string
	}{
		{[]string{"queue", "put", "q", "one"}, "1\n"},
		{[]string{"queue", "put", "--key", "k", "q", "two"}, "2\n"},
		{[]string{"queue", "put", "--key", "k", "q", "again"}, "2\n"},
		{[]string{"queue", "put", "--delay", "1h", "q", "later"}, "3\n"},
		{[]string{"queue", "stats", "q"}, "ready 2  delayed 1  in flight 0  dead 0\n"},
	} {
		r := run(t, ns, c.args...)
		if r.code != 0 || r.stdout != c.out {
			t.Errorf("baton %q = %d, %q, %q; want %q", c.args, r.code, r.stdout, r.stderr, c.out)
		}
	}
	r := run(t, ns, "queue", "stats", "--json", "q")
	var s struct {
		Name                           string
		Ready, Delayed, InFlight, Dead int
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Name != "q" || s.Ready != 2 || s.Delayed != 1 {
		t.Errorf("stats --json = %q (%v)", r.stdout, err)
	}
	for _, args := range [][]string{
		{"queue", "put", "--attempts", "0", "q", "x"},
		{"queue", "put", "--delay", "-1", "q", "x"},
		{"queue", "put", "a//b", "x"},
		{"queue", "requeue", "q"},
		{"queue", "purge", "q", "x1"},
		{"work", "q"},
		{"work", "-j", "0", "q", "true"},
	} {
		if r := run(t, ns, args...); r.code != exitUsage {
			t.Errorf("baton %q = %d, %q; want %d", args, r.code, r.stderr, exitUsage)
		}
	}
	if r := run(t, ns, "queue", "stats", "q"); r.stdout != "ready 2  delayed 1  in flight 0  dead 0\n" {
		t.Errorf("refused commands changed the queue: %q", r.stdout)
	}
	if r := run(t, ns, "status", "q"); r.code != 0 || !strings.Contains(r.stdout, "queue") || !strings.Contains(r.stdout, "ready 2, delayed 1") {
		t.Errorf("status of a queue = %d, %q", r.code, r.stdout)
	}
	if r := run(t, ns, "rm", "q"); r.code != 0 {
		t.Errorf("rm of a queue = %d, %q", r.code, r.stderr)
	}
	if r := run(t, ns, "queue", "stats", "q"); r.stdout != "ready 0  delayed 0  in flight 0  dead 0\n" {
		t.Errorf("a removed queue is not empty: %q", r.stdout)
	}
}

// baton work runs the command per job with its payload and environment,
// acks on 0, fails otherwise (a dead letter after its attempts), and stops
// taking jobs at SIGINT.
func TestWork(t *testing.T) {
	ns := namespace(t)
	dir := t.TempDir()
	for _, p := range []string{"a", "b", "bad"} {
		if r := run(t, ns, "queue", "put", "--attempts", "2", "w", p); r.code != 0 {
			t.Fatalf("put: %d %s", r.code, r.stderr)
		}
	}
	script := `read p; echo "$p $BATON_JOB_ID $BATON_JOB_ATTEMPT $BATON_TOKEN $BATON_NAME" >> "$OUT/$p"; [ "$p" != bad ]`
	c := command(ns, "work", "-j", "2", "w", "--", "sh", "-c", script)
	c.Env = append(c.Env, "OUT="+dir)
	var errb strings.Builder
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := run(t, ns, "queue", "stats", "w")
		if r.stdout == "ready 0  delayed 0  in flight 0  dead 1\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not done: %q; stderr %s", r.stdout, errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := c.Wait()
	if c.ProcessState.ExitCode() != 130 {
		t.Errorf("work after SIGINT: %v; stderr %s", err, errb.String())
	}
	for p, want := range map[string]string{"a": "a 1 1 ", "b": "b 2 1 ", "bad": "bad 3 2 "} {
		data, err := os.ReadFile(filepath.Join(dir, p))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if err != nil || !strings.HasPrefix(lines[len(lines)-1], want) || !strings.HasSuffix(lines[0], " w") {
			t.Errorf("job %s ran with %q (%v); want a last line starting %q", p, data, err, want)
		}
	}
	if !strings.Contains(errb.String(), "exit status 1; it is a dead letter now") {
		t.Errorf("stderr does not report the dead letter: %s", errb.String())
	}
	r := run(t, ns, "queue", "dead", "w")
	if !strings.Contains(r.stdout, `"exit status 1"`) || !strings.Contains(r.stdout, `"bad"`) {
		t.Errorf("queue dead = %q", r.stdout)
	}
}

// A claim lost while its command runs (the queue was removed) sends the
// command SIGTERM.
func TestWorkLostClaim(t *testing.T) {
	ns := namespace(t)
	dir := t.TempDir()
	if r := run(t, ns, "queue", "put", "w", "x"); r.code != 0 {
		t.Fatalf("put: %d %s", r.code, r.stderr)
	}
	script := `trap 'echo term > "$OUT/term"; exit 3' TERM; touch "$OUT/started"; sleep 30 & wait`
	c := command(ns, "work", "w", "--", "sh", "-c", script)
	c.Env = append(c.Env, "OUT="+dir)
	var errb strings.Builder
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	waitFile(t, filepath.Join(dir, "started"), 30*time.Second)
	if r := run(t, ns, "rm", "--force", "w"); r.code != 0 {
		t.Fatalf("rm: %d %s", r.code, r.stderr)
	}
	waitFile(t, filepath.Join(dir, "term"), 30*time.Second)
	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	if !strings.Contains(errb.String(), "claim lost") {
		t.Errorf("stderr does not report the loss: %s", errb.String())
	}
}
