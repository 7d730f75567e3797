//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open pts: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer // guarded by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// testInterruptWhileWaiting: a wait on a terminal prints one line after
// 400 ms; Ctrl-C (SIGINT) then exits 130 and leaves nothing held.
func testInterruptWhileWaiting(t *testing.T, backend string) {
	stop := holder(t, backend, "tty/lock")
	master, slave := openPTY(t)
	var out syncBuffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	c := command(backend, "run", "tty/lock", "true")
	c.Stderr = slave
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var shown time.Duration
	for deadline := time.Now().Add(20 * time.Second); ; {
		if strings.Contains(out.String(), "\n") {
			shown = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			_ = c.Process.Kill()
			_ = c.Wait()
			t.Fatalf("no waiting line on the terminal within 20 s; got %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	line := strings.TrimSpace(out.String())
	if !strings.HasPrefix(line, `baton: waiting for the exclusive lock "tty/lock"`) || strings.Count(line, "\n") != 0 {
		t.Errorf("waiting line %q", line)
	}
	if shown < 400*time.Millisecond {
		t.Errorf("waiting line shown after %v, before 400 ms", shown)
	}
	t.Logf("shown after %v: %s", shown.Round(time.Millisecond), line)

	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	err := waitTimeout(c, 10*time.Second)
	if code := exitCode(err); code != 130 {
		t.Errorf("Ctrl-C while waiting: exit %d (%v), want 130", code, err)
	}
	t.Logf("exited %v after SIGINT", time.Since(sent).Round(time.Millisecond))

	// The interrupted waiter holds nothing and left no place in a queue:
	// once the holder is gone the lock is free at once.
	if code := stop(); code != 143 {
		t.Errorf("holder ended with %d", code)
	}
	if r := run(t, backend, "run", "-n", "tty/lock", "true"); r.code != 0 {
		t.Errorf("-n after the interrupted wait: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestInterruptWhileWaitingLocal(t *testing.T) {
	t.Parallel()
	testInterruptWhileWaiting(t, namespace(t))
}

func TestInterruptWhileWaitingRedis(t *testing.T) {
	t.Parallel()
	url, _ := startRedis(t)
	testInterruptWhileWaiting(t, url)
}
