//go:build linux

package mutex

import "sync"

// handleBits hands out the handle field of the state pattern (1 to
// handleMax), so that no two live handles of one file in this process
// share one: the word alone then tells whose hold it is, and a Close or an
// Unlock of one handle can never give back another's. Handles of other
// files have other words, so each file has its fields of its own, and
// churning through names never runs out of them. A field comes back when
// its handle is unreachable (its cleanup gives it back). When all of a
// file's are taken a new handle gets 0: it does not offer the word path to
// the core (WordLock returns nil), whose own state then tells which handle
// holds, and the driver's Acquire and Release serve it.
var handleBits = handleSets{m: map[[2]uint64]*handleSet{}}

type handleSets struct {
	mu sync.Mutex
	m  map[[2]uint64]*handleSet // by the file's device and inode; guarded by mu
}

type handleSet struct {
	used  [2]uint64 // bit f-1: field f in use
	next  uint8     // where the search for a free field starts: fields are reused as late as they can be
	taken uint8
	users int32 // handles not yet cleaned up, with a field or without
}

// get takes a field for a new handle of the file key, or 0 when all are
// taken. Every get is matched by one put.
func (h *handleSets) get(key [2]uint64) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.m[key]
	if s == nil {
		s = new(handleSet)
		h.m[key] = s
	}
	s.users++
	if s.taken == handleMax {
		return 0
	}
	for i := range handleMax {
		f := (int(s.next) + i) % handleMax
		if s.used[f/64]&(1<<(f%64)) == 0 {
			s.used[f/64] |= 1 << (f % 64)
			s.taken++
			s.next = uint8((f + 1) % handleMax)
			return uint64(f + 1)
		}
	}
	panic("mutex: handle fields miscounted")
}

// put gives field f of the file key back (0: none was taken).
func (h *handleSets) put(key [2]uint64, f uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.m[key]
	if f != 0 {
		s.used[(f-1)/64] &^= 1 << ((f - 1) % 64)
		s.taken--
	}
	if s.users--; s.users == 0 {
		delete(h.m, key)
	}
}

// taken returns how many fields are in use, over every file.
func (h *handleSets) taken() (n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.m {
		n += int(s.taken)
	}
	return n
}
