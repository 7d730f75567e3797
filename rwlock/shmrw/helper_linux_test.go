//go:build linux

package shmrw

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

const (
	envRole = "BATON_SHMRW_ROLE"
	envDir  = "BATON_SHMRW_DIR"
	envName = "BATON_SHMRW_NAME"
)

// runRole runs in a re-executed test binary: "write" and "read" take the
// lock, say "held TOKEN" and keep it; "waitwrite" says "waiting", waits for
// the write lock, says "held TOKEN" and holds it until its stdin closes.
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
	l, err := Open(ns, os.Getenv(envName))
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	switch role {
	case "write", "read":
		mode := driver.Exclusive
		if role == "read" {
			mode = driver.Shared
		}
		g, err := l.Acquire(ctx, mode)
		if err != nil {
			return fail(err)
		}
		fmt.Printf("held %d\n", g.Token)
		time.Sleep(time.Hour)
	case "countread":
		// Goroutines of one handle take anonymous read locks through the
		// core (the count path) and keep them.
		b := baton.NewBackend(shmDriver{ns})
		m, err := b.RWMutex(ctx, os.Getenv(envName))
		if err != nil {
			return fail(err)
		}
		for range 4 {
			if _, err := m.RLock(ctx); err != nil {
				return fail(err)
			}
		}
		fmt.Println("held")
		time.Sleep(time.Hour)
	case "waitwrite":
		fmt.Println("waiting")
		g, err := l.Acquire(ctx, driver.Exclusive)
		if err != nil {
			return fail(err)
		}
		fmt.Printf("held %d\n", g.Token)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		if err := l.Release(ctx, g); err != nil {
			return fail(err)
		}
		fmt.Println("released")
	default:
		return fail(fmt.Errorf("unknown role %q", role))
	}
	return 0
}

type proc struct {
	cmd *exec.Cmd
	in  *os.File
	out *bufio.Reader
}

func spawn(t testing.TB, ns *ipc.Namespace, name, role string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"="+role, envDir+"="+ns.Dir(), envName+"="+name), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	p := &proc{cmd: cmd, in: w, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		w.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

func (p *proc) expect(t testing.TB, want string) string {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if !strings.HasPrefix(line, want) {
		t.Fatalf("helper said %q (%v), want %q", line, err, want)
	}
	return strings.TrimSpace(line)
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

func open(t testing.TB, ns *ipc.Namespace, name string) *RW {
	t.Helper()
	l, err := Open(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
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
