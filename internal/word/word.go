// Package word is the uncontended half of the futex mutex's protocol: taking
// a free lock word and giving it back with one compare-and-swap each. The
// futex mutex (package mutex) lays out the word in shared memory and serves
// every other case; baton's core calls these methods so that a Lock+Unlock
// nobody contends makes no call into the driver and no system call. Readers
// is the same for the read holds of the shared-memory RW lock (package
// shmrw). Uint64 and its kin are the words of shared memory that every
// same-host mechanism lays out (see atomic.go).
package word

import "sync/atomic"

// Driver in the owner slot marks a hold that the driver gave (or that the
// core moved into its own bookkeeping): never an owner, which counts up
// from 1.
const Driver = ^uint64(0)

// Lock is one handle's view of a lock word.
//
// The state word is 0 when the lock is free and nobody waits; while this
// handle holds it, state&mask == me (me differs between handles of one
// process, so no handle can release another's hold). Other bits (waiters,
// handoff) mean the release must go through the driver.
//
// fence is the last token given and slot the owner of the hold within the
// handle (0 for none, Driver for a driver grant), both in the shared
// mapping beside the state. The fence only grows, by atomic adds (see
// TryLock). Only the holder writes the slot: the compare-and-swap that took
// the word orders that plain store before any other handle's or process's
// access; it is written only when it changes (see TryLock).
type Lock struct {
	state *Uint64
	fence *uint64
	slot  *uint64
	gone  *atomic.Bool
	sync  *atomic.Uint64
	mask  uint64
	me    uint64
}

// Make describes a word, as a value the driver keeps in its handle (no
// allocation of its own). gone is set by the driver when the word is no
// longer shared (its file was removed): releases then go to the driver,
// which reports the loss. sync is ordinary memory, one per lock and
// process, which builds with the race detector use as the edge that the
// word gives the hardware (the detector does not see memory outside the Go
// heap).
func Make(state *Uint64, fence, slot *uint64, gone *atomic.Bool, sync *atomic.Uint64, mask, me uint64) Lock {
	return Lock{state: state, fence: fence, slot: slot, gone: gone, sync: sync, mask: mask, me: me}
}

// TryLock takes the word for owner if it is free and nobody waits, and
// returns the new token.
func (w *Lock) TryLock(owner uint64) (uint64, bool) {
	if !w.state.CompareAndSwap(0, w.me) {
		return 0, false
	}
	// An add, not a store of the token read plus one: Close (or an Unlock
	// that lost a race with it) may give back a hold of this handle before
	// its TryLock gets here, and a late store would put an old token over
	// those of later holders. A hold taken from under a TryLock costs a
	// token that nobody holds.
	t := atomic.AddUint64(w.fence, 1)
	// Stored only when it changes: a store to the word's line just before
	// the next locked instruction (the release) has that instruction wait
	// for it, and an owner mostly takes its lock again. Writing the value
	// the slot already has would change nothing.
	if *w.slot != owner {
		*w.slot = owner
	}
	raceAcquire(w.sync)
	return t, true
}

// HeldBy reports whether owner holds the word through this handle, taken
// by TryLock.
func (w *Lock) HeldBy(owner uint64) bool {
	return w.state.Load()&w.mask == w.me && atomic.LoadUint64(w.slot) == owner
}

// HeldOnWord reports whether this handle holds the word by TryLock, for
// any owner.
func (w *Lock) HeldOnWord() bool {
	return w.state.Load()&w.mask == w.me && atomic.LoadUint64(w.slot) != Driver
}

// Token returns the last token given; the holder's own.
func (w *Lock) Token() uint64 { return atomic.LoadUint64(w.fence) }

// Granted records that the driver gave this handle the lock; the holder
// calls it right after the driver's acquisition returned.
func (w *Lock) Granted() {
	*w.slot = Driver
	raceAcquire(w.sync)
}

// Releasing is called before a hold of this handle is given back by any
// path, for the race detector.
func (w *Lock) Releasing() { raceRelease(w.sync) }

// TryUnlock gives back a hold taken by TryLock with one compare-and-swap. It
// returns false when the release needs the driver (someone waits, a handoff
// is due, or the word is no longer shared); the hold is then still held.
func (w *Lock) TryUnlock() bool {
	raceRelease(w.sync)
	return !w.gone.Load() && w.state.CompareAndSwap(w.me, 0)
}
