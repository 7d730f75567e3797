package ipc

import (
	"fmt"
	"unsafe"

	"github.com/batonlock/baton"
)

// MaxField is the largest handle field Region.TakeField gives.
const MaxField = 127

// MaxRegionSize is the largest region OpenRegion maps (1 GiB).
const MaxRegionSize = 1 << 30

// Region is a named shared-memory region: a file of a namespace, mapped
// read-write and shared, so that every process that opens the same name sees
// the same bytes. A new region is zero-filled. The memory outlives the
// processes that map it and lasts until the file is removed (RemoveRegion);
// in a namespace on tmpfs (/dev/shm, $XDG_RUNTIME_DIR) it does not survive a
// reboot.
//
// A Region is safe for concurrent use; what the bytes mean and how they are
// synchronised is the caller's business (atomic operations and futexes). The
// zero value is not usable; use OpenRegion. After Close, Bytes must no longer
// be used: the memory is unmapped.
type Region struct {
	// The file and its mapping, kept as a pointer (a []byte from
	// unix.Mmap would cost an entry in x/sys's table of mappings per
	// region): for a region of OpenShared, shared by the handles of the
	// file in the process; else this region's own.
	sh       *shared
	released bool // this handle gave back its open (Release)
	closed   bool // this handle gave back its mapping (Close)
}

// Bytes returns the mapped memory.
func (r *Region) Bytes() []byte {
	if r.closed {
		return nil
	}
	return unsafe.Slice((*byte)(r.sh.base()), r.sh.size())
}

// Base returns the address of the mapped memory, nil after Close.
func (r *Region) Base() unsafe.Pointer {
	if r.closed {
		return nil
	}
	return r.sh.base()
}

// Path returns the file that backs the region.
func (r *Region) Path() string { return r.sh.path() }

// Size returns the size of the region in bytes.
func (r *Region) Size() int { return r.sh.size() }

func checkRegionArgs(kind string, size int) error {
	if size <= 0 || size > MaxRegionSize {
		return fmt.Errorf("%w: region size %d, must be in 1..%d", baton.ErrInvalidArgument, size, MaxRegionSize)
	}
	if !validKind(kind) {
		return fmt.Errorf("%w: object kind %q, must be 1 to 32 lower-case letters or digits", baton.ErrInvalidArgument, kind)
	}
	return nil
}

func validKind(kind string) bool {
	if kind == "" || len(kind) > 32 {
		return false
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
