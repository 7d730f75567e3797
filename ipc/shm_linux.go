//go:build linux

package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/batonlock/baton"
	"golang.org/x/sys/unix"
)

// regionMu guards the unmapping of regions against a double Close.
var regionMu sync.Mutex

// OpenRegion maps the region for name among objects of kind (a short
// lower-case word, which becomes a subdirectory of the namespace), creating
// it with size zero bytes when it does not exist. An existing region of
// another size is refused with an error matching baton.ErrMismatch; an
// invalid name or size is refused before anything is created. Concurrent
// openers of a new name agree on one file: the size is set under an
// exclusive flock(2) of the file.
func OpenRegion(ns *Namespace, kind, name string, size int) (*Region, error) {
	e, err := ns.Entry(kind, name)
	if err != nil {
		return nil, err
	}
	return openRegion(e, size, true)
}

// OpenRegionEntry is OpenRegion for a resolved entry (Namespace.Resolve):
// the name is not checked or encoded again.
func OpenRegionEntry(e Entry, size int) (*Region, error) {
	return openRegion(e, size, true)
}

// OpenExistingRegion is OpenRegion for a region that must exist already: it
// returns an error matching fs.ErrNotExist and creates nothing when it does
// not.
func OpenExistingRegion(ns *Namespace, kind, name string, size int) (*Region, error) {
	e, err := ns.Entry(kind, name)
	if err != nil {
		return nil, err
	}
	return openRegion(e, size, false)
}

func openRegion(e Entry, size int, create bool) (*Region, error) {
	if err := checkRegionArgs(e.kind, size); err != nil {
		return nil, err
	}
	if err := e.valid(e.kind); err != nil {
		return nil, err
	}
	path := e.path
	flags := unix.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if create {
		if err := e.ns.EnsureKind(e.kind); err != nil {
			return nil, err
		}
		flags |= unix.O_CREAT
	}
	fd, err := openNoEINTR(path, flags, 0o600)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if err := sizeRegion(fd, path, size); err != nil {
		return nil, err
	}
	addr, err := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, &fs.PathError{Op: "mmap", Path: path, Err: err}
	}
	// A region of its own: not shared, never reclaimed.
	sh := &shared{ns: e.ns, name: e.name, lay: &Layout{Kind: e.kind, Size: size}, addr: addr, fd: -1}
	return &Region{sh: sh}, nil
}

func openNoEINTR(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// sizeRegion gives a new (empty) file its size, or checks the size of an
// existing one, under an exclusive flock so that two creators cannot both
// see an empty file and set different sizes.
func sizeRegion(fd int, path string, size int) error {
	// A file of the size already needs no lock (holders of a shared flock
	// of it, OpenShared's handles, would make an exclusive one wait).
	var st0 unix.Stat_t
	if unix.Fstat(fd, &st0) == nil && st0.Mode&unix.S_IFMT == unix.S_IFREG && st0.Size == int64(size) {
		return nil
	}
	if err := Flock(fd, unix.LOCK_EX); err != nil {
		return &fs.PathError{Op: "flock", Path: path, Err: err}
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: %s is not a regular file", baton.ErrMismatch, path)
	}
	switch st.Size {
	case 0:
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			return &fs.PathError{Op: "truncate", Path: path, Err: err}
		}
	case int64(size):
	default:
		return fmt.Errorf("%w: region %s has %d bytes, not %d", baton.ErrMismatch, path, st.Size, size)
	}
	return nil
}

// Close unmaps the region. The file and its contents stay, except that a
// region of OpenShared is released first (Release), and its mapping goes
// with the last handle of the process that shares it. Closing twice is a
// no-op.
func (r *Region) Close() error {
	r.Release()
	regionMu.Lock()
	done := r.closed
	r.closed = true
	regionMu.Unlock()
	if done {
		return nil
	}
	if r.sh.fd >= 0 {
		if r.sh.maps.Add(-1) == 0 {
			r.sh.unmap()
		}
		return nil
	}
	if err := r.sh.unmapErr(); err != nil {
		return &fs.PathError{Op: "munmap", Path: r.Path(), Err: err}
	}
	return nil
}

// RemoveRegion removes the file of the region for name among objects of
// kind. Processes that have it mapped keep their mapping, which no longer
// has a name: a later OpenRegion creates a new, zero-filled region. It
// returns an error matching fs.ErrNotExist when there is no such region.
func RemoveRegion(ns *Namespace, kind, name string) error {
	if !validKind(kind) {
		return fmt.Errorf("%w: object kind %q", baton.ErrInvalidArgument, kind)
	}
	path, err := ns.Path(kind, name)
	if err != nil {
		return err
	}
	// Handles opened here from now on map the file the path names next,
	// not this one (handles of other processes notice at their watch).
	forgetShared(ns, kind, name)
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("ipc: region %q: %w", name, fs.ErrNotExist)
		}
		return err
	}
	return nil
}
