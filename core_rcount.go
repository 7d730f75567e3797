package baton

import (
	"fmt"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/word"
)

// The count path of RWMutex drivers that count a handle's anonymous readers
// in shared memory (driver.ReadCounter): a read hold with no owner is one
// compare-and-swap on the handle's count and one load of the lock's state
// word, with no handle lock and no call into the driver. Such holds are not
// in readState's fields under mu; owned readers keep the regular path, so
// that the handle knows them (reentrancy, ErrUpgrade).
//
// Anonymous holds are fungible: an anonymous RUnlock gives back one of the
// count's holds or one of the Shared grant's. It takes the count path only
// while no anonymous hold is on the grant (anonA), so that each hold it
// gives back is one the count has (a hold being taken and found too late,
// which is given back at once, counts too).

// newReadState is the reader bookkeeping of a new RWMutex handle over d.
func newReadState(d driver.Lock) *readState {
	r := &readState{}
	if rc, ok := d.(driver.ReadCounter); ok {
		r.rd, r.rloss = rc.ReadCounter()
	}
	return r
}

// The count path itself is written out in rwHandle's RLock, TryRLock and
// RUnlock (core_word.go), so that an uncontended call is one call: RLock
// and TryRLock take a hold on the count when they may (below), and the
// driver's count admits it; RUnlock gives one back when no anonymous hold
// is on the grant and the count has one. Whatever they cannot do there, the
// regular path does. Neither looks at closedA first: a count that Close
// gave back refuses them.

// A read hold of ctx may be taken on the count when the driver counts, no
// writer of the handle queues, no observer watches, and the context has
// no owner and is not done. RLock and TryRLock check that in line: a call
// here, even only for a context that is not a plain one (the usual case:
// a request's), measurably slows the pair.

// rlockClosed gives back a hold just taken on the count of a handle being
// closed. Close may have given it back already (the driver's Close starts
// a new generation of the count), or not yet: one of the two gives it
// back. (Close sets closedA before it closes the driver.)
func (h *lockHandle) rlockClosed() { h.r.rd.RUnlock() }

// runlockCount is the regular path's release of an anonymous read hold on
// the count, for an RUnlock that found none on the grant. h.mu is held.
func (h *lockHandle) runlockCount() (bool, error) {
	rd := h.r.rd
	if rd == nil {
		return false, nil
	}
	switch rd.RUnlock() {
	case word.Released:
		if rd.Gone() {
			return true, h.r.rloss.Err()
		}
		return true, nil
	case word.Lost:
		if h.closed {
			return false, nil
		}
		return true, fmt.Errorf("read: %w", ErrLost)
	}
	return false, nil
}

// queueWriter counts a writer of the handle that queues, if mode is
// Exclusive, and reports whether it did: while one queues, new anonymous
// readers of the handle take the regular path, behind it. h.mu is held.
func (r *readState) queueWriter(mode Mode) bool {
	if r == nil || r.rd == nil || mode != Exclusive {
		return false
	}
	r.writers.Add(1)
	return true
}

// unqueueWriter undoes queueWriter when the writer's Lock returns.
func (r *readState) unqueueWriter() { r.writers.Add(-1) }
