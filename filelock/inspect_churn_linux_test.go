//go:build linux

package filelock

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInspectWhileLocksChurn: /proc/locks is read a page at a time, and
// flocks taken and dropped elsewhere between two pages shift its lines,
// so a torn read can list a line twice. Inspect must still report the
// one holder of a held file once.
func TestInspectWhileLocksChurn(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "held")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// Enough other flocks that /proc/locks spans several pages.
	var others []*os.File
	defer func() {
		for _, o := range others {
			o.Close()
		}
	}()
	for i := range 300 {
		o, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, o)
		if err := unix.Flock(int(o.Fd()), unix.LOCK_SH); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := g; !stop.Load(); i = (i + 2) % len(others) {
				fd := int(others[i].Fd())
				unix.Flock(fd, unix.LOCK_UN)
				unix.Flock(fd, unix.LOCK_SH)
			}
		})
	}
	defer wg.Wait()
	defer stop.Store(true)
	for range 500 {
		st, err := Inspect(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 1 || st.Holders[0].PID != os.Getpid() {
			t.Fatalf("holders %+v; want this process once", st.Holders)
		}
	}
}
