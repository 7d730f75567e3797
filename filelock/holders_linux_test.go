//go:build linux

package filelock

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestForEachHolder(t *testing.T) {
	locks := []byte("1: FLOCK  ADVISORY  WRITE 4242 00:1a:77 0 EOF\n" +
		"1: FLOCK  ADVISORY  WRITE 4141 00:1b:77 0 EOF\n" +
		"1: -> FLOCK  ADVISORY  WRITE 4343 00:1a:77 0 EOF\n" +
		"2: FLOCK  ADVISORY  READ 4444 00:1a:77 0 EOF\n" +
		"3: POSIX  ADVISORY  WRITE 4545 00:1a:77 0 EOF\n" +
		"4: FLOCK  ADVISORY  WRITE 4646 00:1a:78 0 EOF\n" +
		"5: OFDLCK ADVISORY  READ  -1 00:1a:77 0 EOF")
	var got []int
	var modes []bool
	forEachHolder(locks, unix.Mkdev(0, 0x1a), 77, func(pid int, write bool) {
		got = append(got, pid)
		modes = append(modes, write)
	})
	if want := []int{4242, 4444}; !slices.Equal(got, want) || !slices.Equal(modes, []bool{true, false}) {
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
	forEachHolder(locks, uint64(st.Dev), st.Ino, func(pid int, _ bool) { got = append(got, pid) })
	if !slices.Contains(got, os.Getpid()) {
		t.Fatalf("holders of the inode %v; want this process, %d", got, os.Getpid())
	}
}

// TestHandleMarksFile: a handle keeps an inotify mark of its process on
// its lock file from open to Close. A holder watched with inotify that
// dies while the file has no other mark waits for the kernel's teardown
// of the file's marks (milliseconds) before its flock goes; a waiter's
// handle spares it that (bench's mutex-kill table measures it).
func TestHandleMarksFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if marked(t, st.Ino) {
		t.Fatal("the file is marked before any handle is open")
	}
	m := openMutex(t, path)
	rw, err := OpenRWMutex(path, path+".gate")
	if err != nil {
		t.Fatal(err)
	}
	if !marked(t, st.Ino) {
		t.Fatal("no mark on the file of an open handle")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !marked(t, st.Ino) {
		t.Fatal("no mark on the file while another handle has it open")
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if marked(t, st.Ino) {
		t.Fatal("the file is still marked after the last handle closed")
	}
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
