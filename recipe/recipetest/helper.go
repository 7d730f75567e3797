package recipetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Helper processes: the test binary re-executed with envRole set, running
// one role of roles against the suite's backend, talking to the test over
// standard output (one line per event) and standard input (closed: stop).

var roles = map[string]func(e *env, arg string) error{
	"leader":       roleLeader,
	"countdown":    roleCountdown,
	"member":       roleMember,
	"ratehammer":   roleRateHammer,
	"intervalhang": roleIntervalHang,
	"permithold":   rolePermitHold,
}

func runHelper(role string, suites []Suite) int {
	suiteName, role, _ := strings.Cut(role, "/")
	for _, s := range suites {
		if s.Name != suiteName {
			continue
		}
		f := roles[role]
		if f == nil {
			fmt.Fprintf(os.Stderr, "recipetest: no role %q\n", role)
			return 2
		}
		if err := f(&env{s: s, cfg: os.Getenv(envCfg)}, os.Getenv(envArg)); err != nil {
			fmt.Fprintf(os.Stderr, "recipetest: %s: %v\n", role, err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "recipetest: no suite %q\n", suiteName)
	return 2
}

// proc is a helper process.
type proc struct {
	cmd   *exec.Cmd
	out   *bufio.Reader
	lines chan string   // closed at the end of its output
	read  chan struct{} // closed once the output is read to its end
}

// spawn starts a helper in role with arg; it is killed when the test ends.
func (e *env) spawn(t testing.TB, role, arg string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+e.s.Name+"/"+role, envCfg+"="+e.cfg, envArg+"="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	// Room for every line a helper says in a test, so that the reader never
	// waits for the test and kill can read the output to its end.
	p := &proc{cmd: cmd, out: bufio.NewReader(out), lines: make(chan string, 1<<16), read: make(chan struct{})}
	go func() {
		defer close(p.read)
		defer close(p.lines)
		for {
			l, err := p.out.ReadString('\n')
			if err != nil {
				return
			}
			p.lines <- strings.TrimSpace(l)
		}
	}()
	t.Cleanup(p.kill)
	return p
}

// expect waits for the helper's next line and fails unless it starts with
// want; it returns the rest of the line.
func (p *proc) expect(t testing.TB, want string, timeout time.Duration) string {
	t.Helper()
	select {
	case l, open := <-p.lines:
		if !open || !strings.HasPrefix(l, want) {
			t.Fatalf("helper said %q (open %v), want %q", l, open, want)
		}
		return strings.TrimSpace(strings.TrimPrefix(l, want))
	case <-time.After(timeout):
		t.Fatalf("helper silent for %v, want %q", timeout, want)
	}
	return ""
}

// kill ends the helper by SIGKILL and waits for it. What it said before
// is read first: Wait closes the pipe, and lines still in it would be lost.
func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.read:
		case <-time.After(10 * time.Second):
		}
		_ = p.cmd.Wait()
	}
}
