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
// tenant, thousands of them. Every handle on a name of its own has the
// word path, and with it a word.Lock in its struct (until handle fields
// became per file, those past a process's 127th had none, and the bound
// was 512 B).
const handleBytes = 576

func TestHandleHeap(t *testing.T) {
	// Without a linger: the files of one round's closed handles would
	// otherwise go, or not, while the next round measures.
	b, err := local.Open(t.TempDir(), local.WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// As locktest's HandleMemory: each of the n handles on a name of its
	// own.
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
