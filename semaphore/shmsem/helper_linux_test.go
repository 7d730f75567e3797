//go:build linux

package shmsem

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/semaphore"
)

const (
	envRole = "BATON_SHMSEM_ROLE"
	envDir  = "BATON_SHMSEM_DIR"
	envName = "BATON_SHMSEM_NAME"
	envCap  = "BATON_SHMSEM_CAP"
	envN    = "BATON_SHMSEM_N"
)

// runRole runs in a re-executed test binary. "hold" takes N permits, says
// "held" and keeps them; "cycle" says "ready" and takes and gives back N
// permits in a loop until killed; "contend" takes and gives back 1 permit
// for N ms, then reports ("contendsysv" likewise on the System V semaphore
// of the name).
func runRole(role string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if role == "stress" {
		if err := stressRole(); err != nil {
			return fail(err)
		}
		return 0
	}
	ns, err := ipc.OpenNamespace(os.Getenv(envDir))
	if err != nil {
		return fail(err)
	}
	capacity, _ := strconv.ParseInt(os.Getenv(envCap), 10, 64)
	n, _ := strconv.ParseInt(os.Getenv(envN), 10, 64)
	var s driver.Semaphore
	if role == "contendsysv" {
		s, err = semaphore.Open(ns, os.Getenv(envName), capacity)
		role = "contend"
	} else {
		s, err = Open(ns, os.Getenv(envName), capacity)
	}
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	switch role {
	case "hold":
		if _, err := s.Acquire(ctx, n); err != nil {
			return fail(err)
		}
		fmt.Println("held")
		time.Sleep(time.Hour)
	case "contend":
		// For the length of envN in ms: Acquire(1)+Release(1) in a loop;
		// then "COUNT WORST-WAIT-NS".
		stop := time.Now().Add(time.Duration(n) * time.Millisecond)
		count, worst := 0, int64(0)
		var over [4]int // waits over 1, 2, 5 and 10 ms
		for ; count%64 != 0 || time.Now().Before(stop); count++ {
			t0 := time.Now()
			g, err := s.Acquire(ctx, 1)
			if err != nil {
				return fail(err)
			}
			w := int64(time.Since(t0))
			worst = max(worst, w)
			for i, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
				if w > int64(d) {
					over[i]++
				}
			}
			if err := s.Release(ctx, g, 1); err != nil {
				return fail(err)
			}
		}
		fmt.Println(count, worst, over[0], over[1], over[2], over[3])
	case "cycle":
		fmt.Println("ready")
		for {
			g, err := s.Acquire(ctx, n)
			if err != nil {
				return fail(err)
			}
			time.Sleep(50 * time.Microsecond)
			if err := s.Release(ctx, g, n); err != nil {
				return fail(err)
			}
		}
	default:
		return fail(fmt.Errorf("unknown role %q", role))
	}
	return 0
}

type proc struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

func spawn(t testing.TB, ns *ipc.Namespace, name, role string, capacity, n int64, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+ns.Dir(), envName+"="+name,
		envCap+"="+strconv.FormatInt(capacity, 10), envN+"="+strconv.FormatInt(n, 10))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

func (p *proc) expect(t testing.TB, want string) {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if strings.TrimSpace(line) != want {
		t.Fatalf("helper said %q (%v), want %q", line, err, want)
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func newNS(t testing.TB) *ipc.Namespace {
	t.Helper()
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func open(t testing.TB, ns *ipc.Namespace, name string, capacity int64) *Sem {
	t.Helper()
	s, err := Open(ns, name, capacity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
