//go:build linux

package mutex

import "sync"

// handleBits hands out the handle field of the state pattern (1 to
// handleMax), so that no two live handles of this process share one: the
// word alone then tells whose hold it is, and a Close or an Unlock of one
// handle can never give back another's. A field comes back when its handle
// is unreachable (its cleanup gives it back). When all are taken a new
// handle gets 0: it does not offer the word path to the core (WordLock
// returns nil), whose own state then tells which handle holds, and the
// driver's Acquire and Release serve it.
var handleBits handleSet

type handleSet struct {
	mu sync.Mutex
	// free holds the fields not in use, oldest given back first (a field
	// is reused as late as it can be), in a ring: n of them from head.
	free    [handleMax]uint8
	head, n int
	filled  bool
}

// get takes a field for a new handle, or 0 when all are taken.
func (s *handleSet) get() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.filled {
		s.filled = true
		for i := range s.free {
			s.free[i] = uint8(i + 1)
		}
		s.n = handleMax
	}
	if s.n == 0 {
		return 0
	}
	f := s.free[s.head]
	s.head = (s.head + 1) % handleMax
	s.n--
	return uint64(f)
}

// put gives field f back (0: none was taken).
func (s *handleSet) put(f uint64) {
	if f == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free[(s.head+s.n)%handleMax] = uint8(f)
	s.n++
}

// taken returns how many fields are in use.
func (s *handleSet) taken() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.filled {
		return 0
	}
	return handleMax - s.n
}
