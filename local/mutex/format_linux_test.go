//go:build linux

package mutex

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// TestForeignFileUnchanged: a file of the mutex's size in its place whose
// first word is not the mutex's magic (another layout, another program) is
// refused, and nothing in it is written, though the namespace's token
// floor is above the word where the mutex keeps its counter (an opener
// lifts its counter to the floor).
func TestForeignFileUnchanged(t *testing.T) {
	ns := testNS(t)
	floor, err := ipc.TokenFloor(ns)
	if err != nil {
		t.Fatal(err)
	}
	ipc.RaiseFloor(floor, 1<<40)
	path, err := ns.Path(Kind, "foreign")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	var foreign [mutexSize]byte
	*(*uint32)(unsafe.Pointer(&foreign[offMagic])) = mutexMagic + 1
	if err := os.WriteFile(path, foreign[:], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ns, "foreign"); !errors.Is(err, baton.ErrMismatch) {
		t.Fatalf("Open of a foreign file: %v", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, foreign[:]) {
		t.Fatalf("the refused file changed:\n% x\nwas\n% x", b, foreign)
	}
}
