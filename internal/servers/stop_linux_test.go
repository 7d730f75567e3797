package servers

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startPG starts a throwaway PostgreSQL for a test, skipping the test
// when PostgreSQL is not installed (failing it in CI).
func startPG(t *testing.T) *proc {
	t.Helper()
	_, p, err := runPostgres()
	if err != nil {
		if missing(err) {
			t.Skipf("no PostgreSQL: %v", err)
		}
		t.Fatal(err)
	}
	return p
}

// missing reports that err says the server is not installed, which skips a
// test, but for in CI.
func missing(err error) bool {
	return os.Getenv("CI") != "true" && (errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist))
}

// pgShm returns what shared memory the running server p made: the POSIX
// segments (/dev/shm/PostgreSQL.*) that its postmaster maps, and the id
// of its System V segment (postmaster.pid's seventh line: key and id).
func pgShm(t *testing.T, p *proc) (posix []string, sysvID string) {
	t.Helper()
	maps, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "maps"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(string(maps), "\n") {
		if i := strings.Index(l, "/dev/shm/PostgreSQL."); i >= 0 && !seen[l[i:]] {
			seen[l[i:]] = true
			posix = append(posix, l[i:])
		}
	}
	pid, err := os.ReadFile(filepath.Join(p.dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if ls := strings.Split(string(pid), "\n"); len(ls) > 6 {
		if f := strings.Fields(ls[6]); len(f) == 2 {
			sysvID = f[1]
		}
	}
	if len(posix) == 0 || sysvID == "" {
		t.Fatalf("the server shows no shared memory: segments %q, System V id %q", posix, sysvID)
	}
	return posix, sysvID
}

// checkNoShm fails t if a segment of posix or the System V segment sysvID
// is still there, or a process of the server's group still runs.
func checkNoShm(t *testing.T, p *proc, posix []string, sysvID string) {
	t.Helper()
	for _, f := range posix {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left behind", f)
		}
	}
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 1 && f[1] == sysvID {
			t.Errorf("System V segment %s left behind: %s", sysvID, l)
		}
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("a process of the server's group still runs (kill 0: %v)", err)
	}
	if _, err := os.Stat(p.dir); p.dir != "" && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s left behind (%v)", p.dir, err)
	}
}

// TestPostgresStopLeavesNoShm: stopping a PostgreSQL leaves none of its
// shared memory, nor any of its processes; nor does the signal it gets
// when the process that started it dies.
func TestPostgresStopLeavesNoShm(t *testing.T) {
	t.Run("Stop", func(t *testing.T) {
		p := startPG(t)
		posix, id := pgShm(t, p)
		p.stop()
		checkNoShm(t, p, posix, id)
	})
	t.Run("Orphaned", func(t *testing.T) {
		p := startPG(t)
		posix, id := pgShm(t, p)
		// What the server gets when the thread that started it ends.
		p.quit = p.orphan
		p.stop()
		checkNoShm(t, p, posix, id)
	})
}

// TestStopIsClean: every server stops on its shutdown signal, well before
// stop would kill it.
func TestStopIsClean(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every server")
	}
	for _, name := range []string{Redis, MariaDB, ZooKeeper} {
		t.Run(name, func(t *testing.T) {
			_, stop, err := Serve(name)
			if err != nil {
				if missing(err) {
					t.Skipf("no %s: %v", name, err)
				}
				t.Fatal(err)
			}
			t0 := time.Now()
			stop()
			d := time.Since(t0)
			if d >= stopTimeout {
				t.Errorf("stopped after %v: killed, not shut down", d)
			}
			t.Logf("stopped in %v", d)
		})
	}
}
