//go:build linux

package ipc

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"golang.org/x/sys/unix"
)

// floorFile is the file of a namespace that holds its token floor.
const floorFile = "tokens"

var floors sync.Map // namespace directory → *atomic.Uint64, mapped for good

// tokenFloor maps the token floor of ns: above every token of every file
// the namespace reclaimed.
func tokenFloor(ns *Namespace) (*atomic.Uint64, error) {
	if f, ok := floors.Load(ns.dir); ok {
		return f.(*atomic.Uint64), nil
	}
	path := filepath.Join(ns.dir, floorFile)
	fd, err := openNoEINTR(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	const size = 64
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > size {
		return nil, fmt.Errorf("%w: %s is not a token floor", baton.ErrMismatch, path)
	}
	// Growing to the size twice is harmless, so creators need no lock.
	if st.Size < size {
		if err := unix.Ftruncate(fd, size); err != nil {
			return nil, &fs.PathError{Op: "truncate", Path: path, Err: err}
		}
	}
	addr, err := unix.MmapPtr(fd, 0, nil, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, &fs.PathError{Op: "mmap", Path: path, Err: err}
	}
	f, loaded := floors.LoadOrStore(ns.dir, (*atomic.Uint64)(addr))
	if loaded {
		unix.MunmapPtr(addr, size)
	}
	return f.(*atomic.Uint64), nil
}

// raise makes the floor at least v.
func raise(f *atomic.Uint64, v uint64) {
	for {
		old := f.Load()
		if old >= v || f.CompareAndSwap(old, v) {
			return
		}
	}
}

// TokenFloor returns the token floor of ns, mapped for the life of the
// process: tokens of names whose files were reclaimed are at most its
// value, and files made after count on from it (RaiseFloor, then a counter
// lifted to the floor before each token).
func TokenFloor(ns *Namespace) (*atomic.Uint64, error) { return tokenFloor(ns) }

// RaiseFloor makes the floor at least v.
func RaiseFloor(f *atomic.Uint64, v uint64) { raise(f, v) }

// RemoveFenced is RemoveKind for a kind whose file keeps a token counter
// (lay.Fence, lay.Last): the namespace's token floor is raised to the
// last token given before the file goes, so that a later file of the name
// counts on from the tokens this one gave.
func RemoveFenced(ns *Namespace, kind, name, what string, lay *Layout) error {
	path, err := ns.Path(kind, name)
	if err != nil {
		return err
	}
	if fd, err := openNoEINTR(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Size >= int64(lay.Size) {
			if addr, err := unix.MmapPtr(fd, 0, nil, uintptr(lay.Size), unix.PROT_READ, unix.MAP_SHARED); err == nil {
				if f, err := tokenFloor(ns); err == nil {
					raise(f, lay.last(unsafe.Slice((*byte)(addr), lay.Size)))
				}
				unix.MunmapPtr(addr, uintptr(lay.Size))
			}
		}
		unix.Close(fd)
	}
	return RemoveKind(ns, kind, name, what)
}

// raiseFence lifts the file's token counter to the floor, as read now. Every
// mapping does so before its first token: a file of the name reclaimed
// before this one was linked had raised the floor to its last token
// before it went, so what this file gives is above that, whoever linked it
// and whenever they read the floor.
func (sh *shared) raiseFence(floor *atomic.Uint64) {
	if floor != nil {
		raise((*atomic.Uint64)(unsafe.Add(sh.addr, sh.lay.Fence)), floor.Load())
	}
}
