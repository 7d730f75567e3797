//go:build linux

package filelock

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

const (
	envRole  = "BATON_FILELOCK_HELPER"
	envDir   = "BATON_FILELOCK_DIR"
	envCount = "BATON_FILELOCK_COUNT"
)

// open opens the lock a helper or a hammering goroutine uses: the mutex
// "m" of dir, or the reader/writer lock "data"/"gate" for roles starting
// with "rw".
func open(dir, role string) (driver.Lock, error) {
	if strings.HasPrefix(role, "rw") {
		return OpenRWMutex(filepath.Join(dir, "data"), filepath.Join(dir, "gate"))
	}
	return OpenMutex(filepath.Join(dir, "m"))
}

// helper runs in a re-executed test binary. "hold" and "rwhold" take the
// lock, say so, and wait to be killed; "hammer" and "rwhammer" run the
// checked critical section of hammer and exit 0 when every check held.
func helper(role string) int {
	dir := os.Getenv(envDir)
	switch role {
	case "hold", "rwhold":
		l, err := open(dir, role)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		g, err := l.Acquire(context.Background(), driver.Exclusive)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("held %d\n", g.Token)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return 0
	case "hammer", "rwhammer":
		n, _ := strconv.Atoi(os.Getenv(envCount))
		if err := hammer(dir, strings.TrimSuffix(role, "hammer"), n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	return 2
}

// hammer takes the lock of kind ("" or "rw") exclusively n times, on a
// handle it closes and opens again now and then. Under the lock it checks, against a log file shared by every
// process, that the token is larger than every token given before and that
// nobody else is inside (the log's "inside" word, set on entry and cleared
// on exit, is 0 on entry).
func hammer(dir, kind string, n int) (err error) {
	l, err := open(dir, kind)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := l.Close(); err == nil {
			err = cerr
		}
	}()
	log, err := os.OpenFile(filepath.Join(dir, "log"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	var b [16]byte // last token, inside
	for i := range n {
		if i%25 == 24 {
			_ = l.Close()
			if l, err = open(dir, kind); err != nil {
				return err
			}
		}
		g, err := l.Acquire(context.Background(), driver.Exclusive)
		if err != nil {
			return err
		}
		if _, err := log.ReadAt(b[:], 0); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		last, in := binary.NativeEndian.Uint64(b[:8]), binary.NativeEndian.Uint64(b[8:])
		if in != 0 {
			return fmt.Errorf("acquisition %d: someone else is inside", i)
		}
		if g.Token <= last {
			return fmt.Errorf("acquisition %d: token %d after %d", i, g.Token, last)
		}
		binary.NativeEndian.PutUint64(b[:8], g.Token)
		binary.NativeEndian.PutUint64(b[8:], 1)
		if _, err := log.WriteAt(b[:], 0); err != nil {
			return err
		}
		binary.NativeEndian.PutUint64(b[8:], 0)
		if _, err := log.WriteAt(b[:], 0); err != nil {
			return err
		}
		if err := l.Release(context.Background(), g); err != nil {
			return err
		}
	}
	return nil
}

// dataFile is the file that holds the page of the lock open(dir, role) opens.
func dataFile(role string) string {
	if strings.HasPrefix(role, "rw") {
		return "data"
	}
	return "m"
}

type proc struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

func spawn(t *testing.T, dir, role string, n int) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+dir, envCount+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return &proc{cmd: cmd, out: bufio.NewReader(out)}
}

// A holder SIGKILLed while holding frees the lock: the kernel drops its
// flock, and the waiter, which watches the holder, wakes at its exit.
func TestKilledHolderReleases(t *testing.T) {
	for _, role := range []string{"hold", "rwhold"} {
		t.Run(role, func(t *testing.T) {
			dir := t.TempDir()
			p := spawn(t, dir, role, 0)
			line, err := p.out.ReadString('\n')
			if !strings.HasPrefix(line, "held ") {
				t.Fatalf("helper said %q (%v)", line, err)
			}
			tok, _ := strconv.ParseUint(strings.TrimSpace(line[5:]), 10, 64)
			l, err := open(dir, role)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			wantLocked(t, l, driver.Exclusive)
			if st, err := Inspect(filepath.Join(dir, dataFile(role))); err != nil || len(st.Holders) != 1 || st.Holders[0].PID != p.cmd.Process.Pid {
				t.Fatalf("inspect: %+v, %v", st, err)
			}
			errc := make(chan error, 1)
			var g driver.Grant
			go func() {
				var err error
				g, err = l.Acquire(context.Background(), driver.Exclusive)
				errc <- err
			}()
			time.Sleep(20 * time.Millisecond)
			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = p.cmd.Wait()
			select {
			case err := <-errc:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the lock of a killed holder was not freed")
			}
			if g.Token <= tok {
				t.Fatalf("token %d after the dead holder's %d", g.Token, tok)
			}
			mustRelease(t, l, g)
		})
	}
}

// Goroutines on their own handles and two helper processes take the lock
// in turn, with handles closed and reopened: the lock is never held twice,
// and tokens strictly increase across handles and processes.
func TestHammerProcesses(t *testing.T) {
	for _, kind := range []string{"", "rw"} {
		t.Run("kind="+kind, func(t *testing.T) {
			dir := t.TempDir()
			const n = 150
			var procs []*proc
			for range 2 {
				procs = append(procs, spawn(t, dir, kind+"hammer", n))
			}
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					if err := hammer(dir, kind, n); err != nil {
						t.Error(err)
					}
				})
			}
			if kind == "rw" {
				// Readers come and go too; they must never see a writer inside.
				wg.Go(func() { readers(t, dir, n) })
			}
			wg.Wait()
			for _, p := range procs {
				if err := p.cmd.Wait(); err != nil {
					t.Errorf("helper: %v", err)
				}
			}
			var b [8]byte
			f, err := os.ReadFile(filepath.Join(dir, "log"))
			if err != nil || len(f) < 8 {
				t.Fatalf("log: %v", err)
			}
			copy(b[:], f)
			st, err := Inspect(filepath.Join(dir, dataFile(kind)))
			if err != nil {
				t.Fatal(err)
			}
			if last := binary.NativeEndian.Uint64(b[:]); uint64(st.LastToken) != last {
				t.Fatalf("file's counter %d, last token given %d", st.LastToken, last)
			}
		})
	}
}

// readers takes the read lock n times and checks that no writer is inside.
func readers(t *testing.T, dir string, n int) {
	rw, err := open(dir, "rw")
	if err != nil {
		t.Error(err)
		return
	}
	defer rw.Close()
	log, err := os.OpenFile(filepath.Join(dir, "log"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Error(err)
		return
	}
	defer log.Close()
	var b [16]byte
	for range n {
		g, err := rw.Acquire(context.Background(), driver.Shared)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = log.ReadAt(b[:], 0)
		if binary.NativeEndian.Uint64(b[8:]) != 0 {
			t.Error("a reader saw a writer inside")
		}
		if err := rw.Release(context.Background(), g); err != nil && !errors.Is(err, baton.ErrLost) {
			t.Error(err)
			return
		}
	}
}
