// Package word is the uncontended half of the futex mutex's protocol: taking
// a free lock word and giving it back with one compare-and-swap each. The
// futex mutex (package mutex) lays out the word in shared memory and serves
// every other case; baton's core calls these methods so that a Lock+Unlock
// nobody contends makes no call into the driver and no system call. Readers
// is the same for the read holds of the shared-memory RW lock (package
// shmrw).
package word

import (
	"runtime"
	"sync/atomic"
	"time"
)

// The owner slot holds owner+1 for a hold taken by TryLock, none when no
// such hold is complete (a new mapping is all zeroes), and Driver for a
// hold that the driver gave (or that the core moved into its own
// bookkeeping), which owners, counting up from 1, never reach.
const (
	none   = 0
	Driver = ^uint64(0)
)

// Lock is one handle's view of a lock word.
//
// The state word is 0 when the lock is free and nobody waits; while this
// handle holds it, state&mask == me (me differs between handles of one
// process, so no handle can release another's hold). Other bits (waiters,
// handoff) mean the release must go through the driver.
//
// fence is the last token given and slot the owner of the hold within the
// handle (see none and Driver). Both are in the shared mapping beside the
// state and only the holder writes them: the compare-and-swap that took the
// word orders those stores before any other handle's or process's access.
// TryLock writes the slot after the token (storeAfter), so a slot naming an
// owner means the token is there.
type Lock struct {
	state *atomic.Uint64
	fence *uint64
	slot  *uint64
	gone  *atomic.Bool
	sync  *atomic.Uint64
	mask  uint64
	me    uint64
}

// New describes a word. gone is set by the driver when the word is no
// longer shared (its file was removed): releases then go to the driver,
// which reports the loss. sync is ordinary memory, one per lock and
// process, which builds with the race detector use as the edge that the
// word gives the hardware (the detector does not see memory outside the Go
// heap).
func New(state *atomic.Uint64, fence, slot *uint64, gone *atomic.Bool, sync *atomic.Uint64, mask, me uint64) *Lock {
	return &Lock{state: state, fence: fence, slot: slot, gone: gone, sync: sync, mask: mask, me: me}
}

// SlotOwner decodes the owner slot as read from the mapping (for
// inspection): the owner of a hold taken by TryLock, and false when the
// slot names none (no such hold, or one the driver gave).
func SlotOwner(slot uint64) (owner uint64, ok bool) {
	if slot == none || slot == Driver {
		return 0, false
	}
	return slot - 1, true
}

// TryLock takes the word for owner if it is free and nobody waits, and
// returns the new token.
func (w *Lock) TryLock(owner uint64) (uint64, bool) {
	if !w.state.CompareAndSwap(0, w.me) {
		return 0, false
	}
	t := atomic.LoadUint64(w.fence) + 1
	*w.fence = t
	storeAfter(w.slot, owner+1)
	raceAcquire(w.sync)
	return t, true
}

// HeldBy reports whether owner holds the word through this handle, taken
// by TryLock.
func (w *Lock) HeldBy(owner uint64) bool {
	return w.state.Load()&w.mask == w.me && atomic.LoadUint64(w.slot) == owner+1
}

// HeldOnWord reports whether this handle holds the word by a TryLock that
// is complete (its token written), for any owner.
func (w *Lock) HeldOnWord() bool {
	if w.state.Load()&w.mask != w.me {
		return false
	}
	s := atomic.LoadUint64(w.slot)
	return s != none && s != Driver
}

// Settle waits until no TryLock or TryUnlock of this handle is half done:
// one that has taken the word but not yet written its token, or one that
// has begun a release. Whoever gives back a hold of another goroutine (the
// core's Close) settles first, or the late token would go over newer ones.
// The other half is a few instructions away, or a release by the driver.
func (w *Lock) Settle() {
	for i := 0; w.state.Load()&w.mask == w.me && atomic.LoadUint64(w.slot) == none; i++ {
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// Token returns the last token given; the holder's own.
func (w *Lock) Token() uint64 { return atomic.LoadUint64(w.fence) }

// Granted records that the driver gave this handle the lock; the holder
// calls it right after the driver's acquisition returned.
func (w *Lock) Granted() {
	storeAfter(w.slot, Driver)
	raceAcquire(w.sync)
}

// Releasing is called before a hold of this handle is given back through
// the driver, for the race detector and so that the next TryLock starts
// from an empty slot.
func (w *Lock) Releasing() {
	*w.slot = none
	raceRelease(w.sync)
}

// TryUnlock gives back a hold taken by TryLock with one compare-and-swap. It
// returns false when the release needs the driver (someone waits, a handoff
// is due, or the word is no longer shared); the hold is then still held.
//
// The slot is emptied first, so that a TryLock that comes next, by any
// handle, is seen half done until it has written its token. When the
// compare-and-swap fails (or the word is gone) the slot stays empty: the
// hold is on its way to the driver.
func (w *Lock) TryUnlock() bool {
	raceRelease(w.sync)
	*w.slot = none
	return !w.gone.Load() && w.state.CompareAndSwap(w.me, 0)
}
