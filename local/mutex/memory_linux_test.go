//go:build linux && !race

// The race detector's bookkeeping adds to the heap of a handle: the
// bound holds for ordinary builds.

package mutex_test

import (
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/locktest"
)

// handleBytes bounds the whole Go heap of an open futex Mutex handle on
// local, the core's share included: programs keep a handle per row or per
// tenant, thousands of them.
const handleBytes = 512

func TestHandleHeap(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// As locktest's HandleMemory: past the first 127 handles of a process
	// (the word path's handle field), handles have no word.Lock.
	const n = 500
	per, err := locktest.HandleBytes(b, baton.KindMutex, "heap", n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.0f B per open futex Mutex handle", per)
	if per > handleBytes {
		t.Errorf("an open futex Mutex handle keeps %.0f B of Go heap, want at most %d", per, handleBytes)
	}
}
