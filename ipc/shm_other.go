//go:build !linux

package ipc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// OpenRegion returns an error matching errors.ErrUnsupported on this system
// (after validating its arguments).
func OpenRegion(ns *Namespace, kind, name string, size int) (*Region, error) {
	if err := checkRegionArgs(kind, size); err != nil {
		return nil, err
	}
	if _, err := ns.Path(kind, name); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("ipc: shared memory: %w", errors.ErrUnsupported)
}

// OpenRegionEntry returns an error matching errors.ErrUnsupported on this
// system.
func OpenRegionEntry(e Entry, size int) (*Region, error) {
	if err := checkRegionArgs(e.kind, size); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("ipc: shared memory: %w", errors.ErrUnsupported)
}

// Close is a no-op on this system.
func (r *Region) Close() error { return nil }

// RemoveRegion returns an error matching errors.ErrUnsupported on this system.
func RemoveRegion(ns *Namespace, kind, name string) error {
	return fmt.Errorf("ipc: shared memory: %w", errors.ErrUnsupported)
}

// OpenExistingRegion returns an error matching errors.ErrUnsupported on this
// system.
func OpenExistingRegion(ns *Namespace, kind, name string, size int) (*Region, error) {
	return OpenRegion(ns, kind, name, size)
}

// Layout describes the file of a kind of object for OpenShared.
type Layout struct {
	Kind  string
	Size  int
	Magic uint32
	Fence int
	Last  func(b []byte) uint64
	Idle  func(b []byte) bool
}

type shared struct{}

func (*shared) path() string { return "" }
func (*shared) size() int    { return 0 }

// OpenShared returns an error matching errors.ErrUnsupported on this system.
func OpenShared(e Entry, lay *Layout) (*Region, error) {
	if err := checkRegionArgs(e.kind, lay.Size); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("ipc: shared memory: %w", errors.ErrUnsupported)
}

// Release is a no-op on this system.
func (r *Region) Release() {}

// Forget is a no-op on this system.
func (r *Region) Forget() {}

// DevIno returns zeros on this system.
func (r *Region) DevIno() (dev, ino uint64) { return 0, 0 }

func (*shared) base() unsafe.Pointer { return nil }

// TokenFloor returns an error matching errors.ErrUnsupported on this system.
func TokenFloor(ns *Namespace) (*atomic.Uint64, error) {
	return nil, fmt.Errorf("ipc: shared memory: %w", errors.ErrUnsupported)
}

// RaiseFloor makes the floor at least v.
func RaiseFloor(f *atomic.Uint64, v uint64) {
	for {
		old := f.Load()
		if old >= v || f.CompareAndSwap(old, v) {
			return
		}
	}
}

// RemoveFenced is RemoveKind on this system.
func RemoveFenced(ns *Namespace, kind, name, what string, lay *Layout) error {
	return RemoveKind(ns, kind, name, what)
}

// ReclaimIdle does nothing on this system: no file lingers.
func ReclaimIdle(ns *Namespace) {}
