//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// OpenEntry maps the file of e, an entry of kind whose file has layout lay,
// for a handle of the calling process, creating the file when it is
// missing (ipc.OpenShared: handles of a file in a process share its
// mapping, and the last to close reclaims an idle file). A process whose
// pid does not fit in the pidBits bits its shared words have for it is
// refused (baton.ErrUnsupported): those words would name another process.
// The file's first word is its magic: written when the file is created,
// stamped when zero (a file made by OpenRegion), and otherwise checked, a
// file of another kind or layout giving an error matching baton.ErrMismatch
// (what names the primitive). It returns the mapping and the calling
// process.
func OpenEntry(e ipc.Entry, kind string, lay *ipc.Layout, what string, pidBits int) (*ipc.Region, ipc.Proc, error) {
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
	r, err := ipc.OpenShared(e, lay)
	if err != nil {
		return nil, ipc.Proc{}, err
	}
	p := (*atomic.Uint32)(unsafe.Pointer(&r.Bytes()[0]))
	if v := p.Load(); v != lay.Magic && !p.CompareAndSwap(0, lay.Magic) {
		if v := p.Load(); v != lay.Magic {
			r.Close()
			return nil, ipc.Proc{}, fmt.Errorf("%w: %s is not a %s (magic %#x)", baton.ErrMismatch, r.Path(), what, v)
		}
	}
	return r, self, nil
}
