package batch

import "sync"

// Shared keeps one value per name while something holds it: what the
// handles of one name in a Backend share, gone with the last of them so
// that a Backend keeps nothing of names it no longer has open. The zero
// value is ready to use.
type Shared[T any] struct {
	mu sync.Mutex
	m  map[string]*held[T] // guarded by mu
}

type held[T any] struct {
	refs int
	v    T
}

// Hold returns the value of name, a zero T at its first hold, and counts
// a hold of it.
func (s *Shared[T]) Hold(name string) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*held[T]{}
	}
	h := s.m[name]
	if h == nil {
		h = &held[T]{}
		s.m[name] = h
	}
	h.refs++
	return &h.v
}

// Drop lets go of a hold of name; the last one's going drops its value.
func (s *Shared[T]) Drop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.m[name]; h != nil {
		if h.refs--; h.refs == 0 {
			delete(s.m, name)
		}
	}
}

// Len is the number of names held.
func (s *Shared[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
