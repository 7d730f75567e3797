//go:build linux

package ipc

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// isMapped reports whether every page of [addr, addr+n) is mapped (msync
// fails with ENOMEM on a range with a hole).
func isMapped(addr unsafe.Pointer, n int) bool {
	return unix.Msync(unsafe.Slice((*byte)(addr), n), unix.MS_ASYNC) == nil
}

// TestArenaUnmapsByChunk: small files map into pages of reserved chunks;
// letting them go unmaps a chunk once every page of it was let go, and a
// page let go stays readable by nobody else meanwhile. The maps of the
// process are back to what they were once all are let go.
func TestArenaUnmapsByChunk(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(64); err != nil {
		t.Fatal(err)
	}
	fd := int(f.Fd())
	// Start on a fresh chunk, so that the count below is the test's own.
	arena.mu.Lock()
	arena.cur = nil
	arena.mu.Unlock()
	type m struct {
		addr unsafe.Pointer
		c    *chunk
	}
	var ms []m
	for range 2*chunkPages + 1 {
		addr, c, err := mapFile(fd, 64)
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			t.Fatal("a 64-byte file mapped outside the arena")
		}
		(*[64]byte)(addr)[0]++ // the file is shared by every mapping
		ms = append(ms, m{addr, c})
	}
	if got := (*[64]byte)(ms[0].addr)[0]; got != byte(2*chunkPages+1) {
		t.Fatalf("mappings of one file do not share it: %d", got)
	}
	if ms[0].c == ms[chunkPages].c || ms[chunkPages].c == ms[2*chunkPages].c {
		t.Fatal("more than chunkPages pages handed out of one chunk")
	}
	// Every page of the first chunk but one let go: the chunk stays, its
	// pages kept. (Counted per chunk: other tests' handles may let go of
	// theirs meanwhile.)
	c0 := ms[0].c
	for _, x := range ms[1:chunkPages] {
		if err := unmapFile(x.addr, 64, x.c); err != nil {
			t.Fatal(err)
		}
	}
	arena.mu.Lock()
	kept := c0.kept
	arena.mu.Unlock()
	if kept != chunkPages-1 || !isMapped(c0.base, chunkPages*pageSize) {
		t.Fatalf("%d pages kept (want %d), chunk mapped %v", kept, chunkPages-1, isMapped(c0.base, chunkPages*pageSize))
	}
	// The last one goes with the chunk, and so does the second chunk.
	if err := unmapFile(ms[0].addr, 64, c0); err != nil {
		t.Fatal(err)
	}
	for _, x := range ms[chunkPages:] {
		if err := unmapFile(x.addr, 64, x.c); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*chunk{c0, ms[chunkPages].c} {
		if isMapped(c.base, pageSize) || isMapped(unsafe.Add(c.base, (chunkPages-1)*pageSize), pageSize) {
			t.Fatal("a chunk whose every page was let go is still mapped")
		}
	}
	// The third chunk has pages never handed out: it stays, reserved.
	if c := ms[2*chunkPages].c; !isMapped(c.base, chunkPages*pageSize) {
		t.Fatal("a chunk with pages never handed out was unmapped")
	}
	// A larger file maps on its own.
	if err := f.Truncate(int64(2 * pageSize)); err != nil {
		t.Fatal(err)
	}
	addr, c, err := mapFile(fd, 2*pageSize)
	if err != nil || c != nil {
		t.Fatalf("a 2-page file: chunk %v, %v", c, err)
	}
	if err := unmapFile(addr, 2*pageSize, c); err != nil {
		t.Fatal(err)
	}
}

// TestArenaStrandBound: past strandMax pages kept, a page let go in a
// chunk still in use is unmapped alone (reserved again).
func TestArenaStrandBound(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(64)
	arena.mu.Lock()
	arena.cur = nil
	// Far past the bound, so that other tests' handles let go meanwhile
	// cannot bring it back under.
	const far = strandMax + 1<<20
	saved := arena.stranded
	arena.stranded = far
	arena.mu.Unlock()
	defer func() {
		arena.mu.Lock()
		arena.stranded += saved - far
		arena.mu.Unlock()
	}()
	a, ca, err := mapFile(int(f.Fd()), 64)
	if err != nil {
		t.Fatal(err)
	}
	b, cb, err := mapFile(int(f.Fd()), 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := unmapFile(a, 64, ca); err != nil {
		t.Fatal(err)
	}
	if ca.kept != 0 {
		t.Fatal("a page was kept past strandMax")
	}
	// The page is reserved, not mapped: reading it faults, which mincore
	// cannot tell; its protection can.
	if err := unix.Mprotect(unsafe.Slice((*byte)(a), pageSize), unix.PROT_NONE); err != nil {
		t.Fatalf("the page let go is not reserved any more: %v", err)
	}
	unmapFile(b, 64, cb)
}
