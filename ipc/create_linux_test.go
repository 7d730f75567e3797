//go:build linux

package ipc

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLinkUnnamedBothWays: a new file gets its name by its descriptor
// and, where the kernel refuses that, through /proc/self/fd; a name taken
// already is EEXIST either way, and a missing directory ENOENT.
func TestLinkUnnamedBothWays(t *testing.T) {
	defer noEmptyPath.Store(noEmptyPath.Load())
	for _, viaProc := range []bool{false, true} {
		noEmptyPath.Store(viaProc)
		dir := t.TempDir()
		fd, tmp, err := unnamed(dir)
		if err != nil || tmp != "" {
			t.Skipf("no O_TMPFILE here: %v", err)
		}
		if err := linkUnnamed(fd, dir+"/a"); err != nil {
			t.Fatalf("proc %v: %v", viaProc, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Nlink != 1 {
			t.Fatalf("proc %v: links %d, %v", viaProc, st.Nlink, err)
		}
		fd2, _, err := unnamed(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := linkUnnamed(fd2, dir+"/a"); !errors.Is(err, unix.EEXIST) {
			t.Fatalf("proc %v: a taken name: %v", viaProc, err)
		}
		if err := linkUnnamed(fd2, dir+"/gone/a"); !errors.Is(err, unix.ENOENT) {
			t.Fatalf("proc %v: a missing directory: %v", viaProc, err)
		}
		if !viaProc && noEmptyPath.Load() {
			t.Fatal("a missing directory switched the process to /proc/self/fd")
		}
		unix.Close(fd)
		unix.Close(fd2)
	}
}
