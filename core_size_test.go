package baton

import (
	"testing"
	"unsafe"
)

// Users keep thousands of handles open (one per row or tenant): a
// lockHandle stays within the 192-byte allocation class, which a field
// added or moved carelessly (padding around a bool) would leave.
func TestLockHandleSize(t *testing.T) {
	if n := unsafe.Sizeof(lockHandle{}); n > 192 {
		t.Fatalf("lockHandle is %d bytes, over the 192-byte allocation class", n)
	}
}
