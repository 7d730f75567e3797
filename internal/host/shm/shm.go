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

// Inspect maps the file of name among kind as OpenExisting does and
// returns what describe reads from it, with the fields that every
// shared-memory primitive reports alike filled in first: Name, Backend,
// Impl (kind) and an empty Holders. describe returns how many slots belong
// to dead processes, which Detail then mentions.
func Inspect(ns *ipc.Namespace, kind, name string, size int, magic uint32, what string, describe func(r *ipc.Region, in *baton.Info) (dead int)) (baton.Info, error) {
	r, err := OpenExisting(ns, kind, name, size, magic, what)
	if err != nil {
		return baton.Info{}, err
	}
	defer r.Close()
	in := baton.Info{Name: name, Backend: Backend, Impl: kind, Holders: []baton.Holder{}}
	if dead := describe(r, &in); dead > 0 {
		in.Detail += fmt.Sprintf(", %d dead (the next waiter reclaims them)", dead)
	}
	return in, nil
}

// Backend is the backend name of every shared-memory primitive.
const Backend = "local"
