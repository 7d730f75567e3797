//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// Self returns the calling process for a handle that names it in a shared
// word with pidBits bits for the pid, refusing (baton.ErrUnsupported) a pid
// that does not fit: such a word would name another process.
func Self(pidBits int) (ipc.Proc, error) {
	self, err := ipc.Self()
	if err != nil {
		return ipc.Proc{}, err
	}
	if self.PID >= 1<<pidBits {
		return ipc.Proc{}, fmt.Errorf("pid %d does not fit in %d bits: %w", self.PID, pidBits, baton.ErrUnsupported)
	}
	return self, nil
}

// CheckMagic stamps magic in the first word of r when it is zero (the
// file was just created) and otherwise checks it: a file of another kind
// or layout gives an error matching baton.ErrMismatch, what naming the
// primitive.
func CheckMagic(r *ipc.Region, magic uint32, what string) error {
	p := (*atomic.Uint32)(unsafe.Pointer(&r.Bytes()[0]))
	if p.CompareAndSwap(0, magic) {
		return nil
	}
	if v := p.Load(); v != magic {
		return fmt.Errorf("%w: %s is not a %s (magic %#x)", baton.ErrMismatch, r.Path(), what, v)
	}
	return nil
}
