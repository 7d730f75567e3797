//go:build !linux

package ipc

import (
	"errors"
	"fmt"
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
