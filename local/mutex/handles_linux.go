//go:build linux

package mutex

import "sync"

// handleBits hands out the handle field of the state pattern (1 to
// handleMax), so that no two live handles of this process share one: the
// word alone then tells whose hold it is, and a Close or an Unlock of one
// handle can never give back another's. A field comes back when its handle
// is unreachable. When all are taken a new handle gets 0: it does not offer
// the word path to the core (WordLock returns nil), whose own state then
// tells which handle holds, and the driver's Acquire and Release serve it.
var handleBits handleSet

type handleSet struct {
	mu   sync.Mutex
	used [handleMax + 1]bool // index 0 unused
	next uint64              // where the search for a free field starts
}

func (s *handleSet) get() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range handleMax {
		s.next = s.next%handleMax + 1
		if !s.used[s.next] {
			s.used[s.next] = true
			return s.next
		}
	}
	return 0
}

func (s *handleSet) put(b uint64) {
	if b == 0 {
		return
	}
	s.mu.Lock()
	s.used[b] = false
	s.mu.Unlock()
}
