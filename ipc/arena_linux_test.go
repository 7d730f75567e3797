//go:build linux

package ipc

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func mappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
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
	before := mappings(t)
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
	// pages kept.
	stranded := arena.stranded
	for _, x := range ms[1:chunkPages] {
		if err := unmapFile(x.addr, 64, x.c); err != nil {
			t.Fatal(err)
		}
	}
	if got := arena.stranded - stranded; got != chunkPages-1 {
		t.Fatalf("%d pages kept, want %d", got, chunkPages-1)
	}
	// The last one goes with the chunk.
	if err := unmapFile(ms[0].addr, 64, ms[0].c); err != nil {
		t.Fatal(err)
	}
	if arena.stranded != stranded {
		t.Fatalf("the chunk's pages still counted: %d", arena.stranded-stranded)
	}
	for _, x := range ms[chunkPages:] {
		if err := unmapFile(x.addr, 64, x.c); err != nil {
			t.Fatal(err)
		}
	}
	// The third chunk has pages never handed out: it stays, reserved
	// around the one page it handed out and keeps mapped.
	if after := mappings(t); after > before+2 {
		t.Fatalf("%d mappings after all were let go, %d before", after, before)
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
	saved := arena.stranded
	arena.stranded = strandMax
	arena.mu.Unlock()
	defer func() {
		arena.mu.Lock()
		arena.stranded += saved - strandMax
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
