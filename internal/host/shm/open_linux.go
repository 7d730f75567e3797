//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// OpenEntry maps the file of e, an entry of kind, for a handle of the
// calling process, creating the file of size bytes when it is missing. A
// process whose pid does not fit in the pidBits bits its shared words have
// for it is refused (baton.ErrUnsupported): those words would name another
// process. The file's first word is its magic: stamped when zero (the file
// was just created), and otherwise checked, a file of another kind or
// layout giving an error matching baton.ErrMismatch (what names the
// primitive). It returns the mapping and the calling process.
func OpenEntry(e ipc.Entry, kind string, size int, magic uint32, what string, pidBits int) (*ipc.Region, ipc.Proc, error) {
	if err := e.Check(kind); err != nil {
		return nil, ipc.Proc{}, err
	}
	self, err := ipc.Self()
	if err != nil {
		return nil, ipc.Proc{}, err
	}
	if uint64(self.PID) >= 1<<pidBits {
		return nil, ipc.Proc{}, fmt.Errorf("pid %d does not fit in %d bits: %w", self.PID, pidBits, baton.ErrUnsupported)
	}
	r, err := ipc.OpenRegionEntry(e, size)
	if err != nil {
		return nil, ipc.Proc{}, err
	}
	p := (*atomic.Uint32)(unsafe.Pointer(&r.Bytes()[0]))
	if !p.CompareAndSwap(0, magic) {
		if v := p.Load(); v != magic {
			r.Close()
			return nil, ipc.Proc{}, fmt.Errorf("%w: %s is not a %s (magic %#x)", baton.ErrMismatch, r.Path(), what, v)
		}
	}
	return r, self, nil
}
