package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// batonBin is the baton command built once for the package's tests.
var batonBin string

func TestMain(m *testing.M) {
	if spec := os.Getenv(envEtcdMember); spec != "" {
		os.Exit(runEtcdMember(spec))
	}
	dir, err := os.MkdirTemp("", "baton-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	batonBin = filepath.Join(dir, "baton")
	args := []string{"build", "-o", batonBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building baton:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// namespace returns a backend URL of a fresh same-host namespace directory.
// The System V objects made in it are removed when the test ends.
func namespace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		b, err := local.Open(dir)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer b.Close()
		in, ok := b.(baton.Inspector)
		if !ok {
			return
		}
		ctx := context.Background()
		infos, err := in.List(ctx)
		if err != nil {
			t.Errorf("cleanup: list: %v", err)
			return
		}
		for _, info := range infos {
			if err := in.Remove(ctx, info.Kind, info.Name); err != nil {
				t.Errorf("cleanup: remove %s %q: %v", info.Kind, info.Name, err)
			}
		}
	})
	return "local://" + dir
}

// command returns an unstarted baton with BATON_BACKEND=backend.
func command(backend string, args ...string) *exec.Cmd {
	c := exec.Command(batonBin, args...)
	c.Env = append(os.Environ(), "BATON_BACKEND="+backend)
	return c
}

type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// run runs baton to its end (at most a minute) and returns what it did.
func run(t *testing.T, backend string, args ...string) result {
	t.Helper()
	return runEnv(t, nil, backend, args...)
}

// runEnv is run with extra environment variables.
func runEnv(t *testing.T, env []string, backend string, args ...string) result {
	t.Helper()
	c := command(backend, args...)
	c.Env = append(c.Env, env...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	start := time.Now()
	// run may be called from goroutines other than the test's: it reports
	// with Errorf and returns code -1 instead of stopping the test.
	if err := c.Start(); err != nil {
		t.Errorf("start baton: %v", err)
		return result{code: -1}
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		_ = c.Process.Kill()
		<-done
		t.Errorf("baton %q did not end within a minute; stderr: %s", args, errb.String())
		return result{code: -1, stdout: out.String(), stderr: errb.String()}
	}
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if err != nil {
		xe, ok := err.(*exec.ExitError)
		if !ok {
			t.Errorf("baton %q: %v", args, err)
			return result{code: -1}
		}
		r.code = xe.ExitCode()
		if ws := xe.Sys().(syscall.WaitStatus); ws.Signaled() {
			t.Errorf("baton %q was killed by %v", args, ws.Signal())
		}
	}
	return r
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holder starts "baton run NAME" with a command that creates ready and then
// sleeps until signalled. It returns once the lock is held; the returned
// function stops it (SIGTERM, which baton passes on) and returns baton's
// exit code.
func holder(t *testing.T, backend, name string, extra ...string) func() int {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	args := append(append([]string{"run"}, extra...), name, "sh", "-c", `touch "$0"; exec sleep 60`, ready)
	c := command(backend, args...)
	var errb bytes.Buffer
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		err := c.Wait()
		code := 0
		if xe, ok := err.(*exec.ExitError); ok {
			code = xe.ExitCode()
		}
		done <- code
	}()
	waitFile(t, ready, 20*time.Second)
	stopped := false
	var code int
	stop := func() int {
		if stopped {
			return code
		}
		stopped = true
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case code = <-done:
		case <-time.After(20 * time.Second):
			_ = c.Process.Kill()
			code = <-done
			t.Errorf("holder did not end on SIGTERM; stderr: %s", errb.String())
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return stop
}

// startRedis starts a redis-server on a free loopback port and returns its
// URL and process. A missing redis-server skips the test, except under
// CI=true where it fails it.
func startRedis(t *testing.T) (string, *os.Process) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := exec.Command(path, "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGCONT)
		_ = c.Process.Kill()
		_ = c.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			fmt.Fprint(conn, "PING\r\n")
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if strings.HasPrefix(line, "+PONG") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "redis://" + addr, c.Process
}

// startRedlock starts three independent redis-servers and returns the
// redlock URL over them.
func startRedlock(t *testing.T) string {
	t.Helper()
	var hosts []string
	for range 3 {
		u, _ := startRedis(t)
		hosts = append(hosts, strings.TrimPrefix(u, "redis://"))
	}
	// As in the redislock suite: the 50 ms default per-node timeout is
	// shorter than a loaded test machine's scheduling delays, and 20
	// contenders whose requests time out make little progress.
	return "redlock://" + strings.Join(hosts, ",") + "?node_timeout=200ms"
}
