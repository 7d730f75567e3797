// Package closing holds the rule of every Close that may be called more
// than once: the first call closes, later ones do nothing and return nil.
// It imports only sync, so a same-host program links no network client
// through it.
package closing

import "sync"

// First reports whether this call is the first to close. Under mu, it
// returns false if *closed is set; else it sets *closed and runs take (when
// not nil) before unlocking. take collects, under mu, what the caller
// closes once First has returned true, or closes it right there when that
// must not race with the readers of *closed.
func First(mu *sync.Mutex, closed *bool, take func()) bool {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return false
	}
	*closed = true
	if take != nil {
		take()
	}
	return true
}
