//go:build linux

package ipc

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The files of OpenShared that fit in a page are mapped into chunks of
// address space reserved ahead, a page each, and a chunk is unmapped once
// every file mapped into it was let go: one munmap per chunkPages files.
// Each munmap of pages that another CPU may cache interrupts the CPUs that
// run the process (a TLB shoot-down), which on a virtual machine costs
// more than everything else a short-lived handle does.
const (
	chunkPages = 64
	// strandMax bounds the pages of files let go but still mapped in
	// chunks that others still use (each keeps its file's memory): past
	// it a page is unmapped alone, its place kept reserved.
	strandMax = 1024
)

type chunk struct {
	base  unsafe.Pointer
	next  int // pages handed out
	freed int // pages let go
	kept  int // pages let go and still mapped
}

var arena struct {
	mu       sync.Mutex
	cur      *chunk // the chunk pages are handed out from
	stranded int    // the kept pages of every chunk
}

var pageSize = unix.Getpagesize()

const reserveFlags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_NORESERVE

// mapFile maps size bytes of fd, shared and writable: into a page of a
// chunk when it fits (c is then that chunk), else on its own.
func mapFile(fd, size int) (addr unsafe.Pointer, c *chunk, err error) {
	if size > pageSize {
		addr, err = unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		return addr, nil, err
	}
	arena.mu.Lock()
	c = arena.cur
	if c == nil || c.next == chunkPages {
		base, err := unix.MmapPtr(-1, 0, nil, uintptr(chunkPages*pageSize), unix.PROT_NONE, reserveFlags)
		if err != nil {
			arena.mu.Unlock()
			return nil, nil, err
		}
		c = &chunk{base: base}
		arena.cur = c
	}
	at := unsafe.Add(c.base, c.next*pageSize)
	c.next++
	arena.mu.Unlock()
	// Over a reserved page that was never touched: nothing to shoot down.
	addr, err = unix.MmapPtr(fd, 0, at, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		freePage(at, c, false)
		return nil, nil, err
	}
	return addr, c, nil
}

// unmapFile ends a mapping of mapFile.
func unmapFile(addr unsafe.Pointer, size int, c *chunk) error {
	if c == nil {
		return unix.MunmapPtr(addr, uintptr(size))
	}
	return freePage(addr, c, true)
}

// freePage lets go of the page at addr in c; mapped says that a file is
// mapped there.
func freePage(addr unsafe.Pointer, c *chunk, mapped bool) error {
	arena.mu.Lock()
	c.freed++
	if c.freed == chunkPages {
		arena.stranded -= c.kept
		if arena.cur == c {
			arena.cur = nil
		}
		arena.mu.Unlock()
		return unix.MunmapPtr(c.base, uintptr(chunkPages*pageSize))
	}
	if !mapped {
		arena.mu.Unlock()
		return nil
	}
	if arena.stranded < strandMax {
		c.kept++
		arena.stranded++
		arena.mu.Unlock()
		return nil
	}
	arena.mu.Unlock()
	// Reserved again rather than unmapped: another mapping must not take
	// the place of a page that the chunk's munmap will cover.
	_, err := unix.MmapPtr(-1, 0, addr, uintptr(pageSize), unix.PROT_NONE, reserveFlags|unix.MAP_FIXED)
	return err
}
