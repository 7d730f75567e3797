//go:build linux

package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// OpenExisting maps the file of name among kind for Inspect, without
// creating it: an error matching fs.ErrNotExist when there is none, and
// one matching baton.ErrMismatch when its first word is neither magic nor
// zero (a file being created). what names the primitive in errors.
func OpenExisting(ns *ipc.Namespace, kind, name string, size int, magic uint32, what string) (*ipc.Region, error) {
	if _, err := ns.Path(kind, name); err != nil {
		return nil, err
	}
	r, err := ipc.OpenExistingRegion(ns, kind, name, size)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s %q: %w", what, name, fs.ErrNotExist)
		}
		return nil, err
	}
	if v := (*atomic.Uint32)(unsafe.Pointer(&r.Bytes()[0])).Load(); v != magic && v != 0 {
		r.Close()
		return nil, fmt.Errorf("%w: %s is not a %s (magic %#x)", baton.ErrMismatch, r.Path(), what, v)
	}
	return r, nil
}
