//go:build linux

package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/driver"
)

func TestForEachHolder(t *testing.T) {
	locks := []byte("1: FLOCK  ADVISORY  WRITE 4242 00:1a:77 0 EOF\n" +
		"1: -> FLOCK  ADVISORY  WRITE 4343 00:1a:77 0 EOF\n" +
		"2: FLOCK  ADVISORY  READ 4444 00:1a:77 0 EOF\n" +
		"3: POSIX  ADVISORY  WRITE 4545 00:1a:77 0 EOF\n" +
		"4: FLOCK  ADVISORY  WRITE 4646 00:1a:78 0 EOF\n" +
		"5: OFDLCK ADVISORY  READ  -1 00:1a:77 0 EOF")
	var got []int
	forEachHolder(locks, 77, func(pid int) { got = append(got, pid) })
	if want := []int{4242, 4444}; !slices.Equal(got, want) {
		t.Fatalf("holders %v; want %v", got, want)
	}
}

// TestProcLocksListsOwnFlock: /proc/locks, which waiters read to watch the
// holders, lists a flock this process holds under its pid and inode.
func TestProcLocksListsOwnFlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks: %v", err)
	}
	var got []int
	forEachHolder(locks, st.Ino, func(pid int) { got = append(got, pid) })
	if !slices.Contains(got, os.Getpid()) {
		t.Fatalf("holders of the inode %v; want this process, %d", got, os.Getpid())
	}
}

// TestWaiterMarksFile: a waiter that sleeps keeps an inotify mark of its
// process on the lock file, and drops it when its wait ends. A holder
// watched with inotify that dies while the file has no other mark waits
// for the kernel's teardown of the file's marks (milliseconds) before its
// flock goes; the waiter's mark spares it that (bench's mutex-kill table
// measures it).
func TestWaiterMarksFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	m := openMutex(t, path)
	other, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// A holder that is not baton: it has no mark of its own.
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if marked(t, st.Ino) {
		t.Fatal("the file is marked before anyone waits")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := m.Acquire(ctx, driver.Exclusive); done <- err }()
	waitFor(t, "a mark on the file while the waiter sleeps", func() bool { return marked(t, st.Ino) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	waitFor(t, "no mark once the wait ended", func() bool { return !marked(t, st.Ino) })
}

// marked reports whether an inotify instance of this process has a mark
// on inode ino (its fdinfo lists "inotify wd:N ino:<hex> ...").
func marked(t *testing.T, ino uint64) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(" ino:%x ", ino)
	for _, fd := range fds {
		b, err := os.ReadFile("/proc/self/fdinfo/" + fd.Name())
		if err == nil && strings.Contains(string(b), "inotify wd:") && strings.Contains(string(b), want) {
			return true
		}
	}
	return false
}
