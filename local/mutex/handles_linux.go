//go:build linux

package mutex

import (
	"sync"

	"github.com/batonlock/baton/ipc"
)

// handleBits hands out the handle field of the state pattern (1 to
// handleMax), so that no two live handles of this process share one: the
// word alone then tells whose hold it is, and a Close or an Unlock of one
// handle can never give back another's. A field comes back when its handle
// is unreachable (its cleanup finds it by the handle's region, which
// spares the cleanup a record of its own). When all are taken a new handle gets 0: it does not offer
// the word path to the core (WordLock returns nil), whose own state then
// tells which handle holds, and the driver's Acquire and Release serve it.
var handleBits handleSet

type handleSet struct {
	mu   sync.Mutex
	used [handleMax + 1]*ipc.Region // the region of the handle that has the field; index 0 unused
	next uint64                     // where the search for a free field starts
}

func (s *handleSet) get(r *ipc.Region) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range handleMax {
		s.next = s.next%handleMax + 1
		if s.used[s.next] == nil {
			s.used[s.next] = r
			return s.next
		}
	}
	return 0
}

func (s *handleSet) put(r *ipc.Region) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, u := range s.used {
		if u == r {
			s.used[i] = nil
			return
		}
	}
}
