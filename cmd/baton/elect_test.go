package main

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

func TestElectBadInput(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"elect"}, exitUsage},
		{[]string{"elect", "--listen", "e", "p"}, exitUsage},
		{[]string{"elect", "e", "p", "q"}, exitUsage},
		{[]string{"elect", "e", "--"}, exitUsage},
		{[]string{"elect", "e", strings.Repeat("x", 5000)}, exitUsage},
		{[]string{"elect", "e", "--", "/no/such/command"}, exitNoExec},
	} {
		if r := run(t, ns, c.args...); r.code != c.code {
			t.Errorf("baton %.40q: exit %d, want %d; stderr %q", c.args, r.code, c.code, r.stderr)
		}
	}
}

// lines starts baton with args and returns its standard output by line,
// its standard input and the command.
func lines(t *testing.T, ns string, args ...string) (<-chan string, io.WriteCloser, *exec.Cmd) {
	t.Helper()
	c := command(ns, args...)
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		s := bufio.NewScanner(out)
		for s.Scan() {
			ch <- s.Text()
		}
	}()
	return ch, in, c
}

func expectLine(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l := <-ch:
			if l == want {
				return
			}
		case <-deadline:
			t.Fatalf("no line %q", want)
		}
	}
}

// Campaigns in turn, a listener that sees each leader, and the end of
// standard input as resignation.
func TestElectCampaignAndListen(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	alpha, alphaIn, alphaCmd := lines(t, ns, "elect", "sched", "alpha")
	expectLine(t, alpha, "alpha")
	listen, _, listenCmd := lines(t, ns, "elect", "--listen", "sched")
	expectLine(t, listen, "alpha")
	beta, _, betaCmd := lines(t, ns, "elect", "sched", "beta")
	select {
	case l := <-beta:
		t.Fatalf("a second candidate printed %q while alpha leads", l)
	case <-time.After(300 * time.Millisecond):
	}
	alphaIn.Close() // alpha resigns
	if err := alphaCmd.Wait(); err != nil {
		t.Errorf("alpha after the end of its input: %v", err)
	}
	expectLine(t, beta, "beta")
	expectLine(t, listen, "beta")
	for _, c := range []*exec.Cmd{betaCmd, listenCmd} {
		_ = c.Process.Signal(syscall.SIGTERM)
		if err := c.Wait(); err != nil {
			t.Errorf("%q after SIGTERM: %v", c.Args, err)
		}
	}
}

func TestElectCommand(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	r := run(t, ns, "elect", "job", "--", "sh", "-c", `echo "$BATON_NAME $BATON_TOKEN"; exit 3`)
	f := strings.Fields(r.stdout)
	if r.code != 3 || len(f) != 2 || f[0] != "job" {
		t.Fatalf("elect -- sh: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if tok, err := strconv.ParseUint(f[1], 10, 64); err != nil || tok == 0 {
		t.Errorf("BATON_TOKEN %q", f[1])
	}
	// The leadership went with the command: another is elected at once.
	if r := run(t, ns, "elect", "-w", "5", "job", "--", "true"); r.code != 0 {
		t.Errorf("the next leader: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A leadership lost while the command runs stops the command (SIGTERM,
// then SIGKILL after --grace) and exits 75.
func TestElectCommandLost(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ready := filepath.Join(t.TempDir(), "ready")
	c := command(ns, "elect", "--grace", "300ms", "lost", "--", "sh", "-c", `trap '' TERM; touch "$0"; sleep 30`, ready)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, 20*time.Second)
	b, err := local.Open(strings.TrimPrefix(ns, "local://"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.(baton.Inspector).Remove(context.Background(), baton.KindMutex, "lost"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = waitTimeout(c, 20*time.Second)
	xe, _ := err.(*exec.ExitError)
	if xe == nil || xe.ExitCode() != exitLost {
		t.Errorf("elect after its Mutex was removed: %v, want exit %d", err, exitLost)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("ended %v after the loss: the command was not given its grace", d)
	}
}

// On a network backend: the leader's command runs with its token, and a
// listener sees the proposal.
func TestElectRedis(t *testing.T) {
	t.Parallel()
	url, _ := startRedis(t)
	listen, _, listenCmd := lines(t, url, "elect", "--listen", "net")
	expectLine(t, listen, "")
	r := run(t, url, "elect", "-w", "20", "net", "me", "--", "sh", "-c", `sleep 0.5; echo "$BATON_TOKEN"`)
	if tok, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64); r.code != 0 || err != nil || tok == 0 {
		t.Errorf("elect on Redis: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	expectLine(t, listen, "me")
	_ = listenCmd.Process.Signal(syscall.SIGTERM)
	if err := listenCmd.Wait(); err != nil {
		t.Errorf("listener after SIGTERM: %v", err)
	}
}
