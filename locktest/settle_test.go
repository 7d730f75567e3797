//go:build linux

package locktest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestSettleFDs checks that the leak check counts a file left open, unless
// it is one of the files it was told to leave out (the profile outputs that
// the testing package keeps open).
func TestSettleFDs(t *testing.T) {
	g0, fd0 := runtime.NumGoroutine(), openFDs()
	path := filepath.Join(t.TempDir(), "cpu.prof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = settle(g0, fd0, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "fds") {
		t.Fatalf("settle with a file left open: %v, want an fd leak", err)
	}
	if err := settle(g0, fd0, 50*time.Millisecond, path); err != nil {
		t.Fatalf("settle leaving out the open file: %v", err)
	}
}
