//go:build linux

package filelock

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
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
