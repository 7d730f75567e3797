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

// The state word carries, in its top TokenBits bits, the low bits of the
// lock's tokens, free or held: a hold's token is the base (a 64-bit word
// beside the state, base in Make) plus those bits plus one, and the
// release that ends the hold writes them one higher. So the
// compare-and-swaps that take and give back the word also draw the token,
// and no other atomic is needed. Past the last value the bits start again
// at 0, and whoever ends that hold moves the base up by TokenRound first
// (Next).
const (
	TokenBits  = 8
	TokenShift = 64 - TokenBits
	TokenMask  = (1<<TokenBits - 1) << TokenShift
	TokenOne   = 1 << TokenShift
	TokenRound = 1 << TokenBits // what the base moves by when the bits start again
	tokenLast  = 1<<TokenBits - 1
)

// Lock is one handle's view of a lock word.
//
// The state word, less its token bits, is 0 when the lock is free and
// nobody waits; while this handle holds it, state&mask == me (me differs
// between handles of one process, so no handle can release another's
// hold). Other bits (waiters, handoff) mean the release must go through
// the driver.
//
// base is the base of the tokens and slot the owner of the hold within
// the handle (0 for none, Driver for a driver grant), both in the shared
// mapping beside the state. The base only grows. Only the holder writes
// the slot: the compare-and-swap that took the word orders that plain
// store before any other handle's or process's access; it is written only
// when it changes (see TryLock).
type Lock struct {
	state *Uint64
	base  *uint64
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
func Make(state *Uint64, base, slot *uint64, gone *atomic.Bool, sync *atomic.Uint64, mask, me uint64) Lock {
	return Lock{state: state, base: base, slot: slot, gone: gone, sync: sync, mask: mask, me: me}
}

// TryLock takes the word for owner if it is free and nobody waits, and
// returns the new token.
//
// The base is read after the compare-and-swap, and the caller must check
// that its handle is not being closed after this returns: a Close that
// gives back the hold first (and another holder after it) could otherwise
// have been followed by a move of the base that this late read would see,
// putting this token above a later holder's.
func (w *Lock) TryLock(owner uint64) (uint64, bool) {
	s := w.state.Load()
	if s&^TokenMask != 0 || !w.state.CompareAndSwap(s, s|w.me) {
		return 0, false
	}
	// TokenOf spelled out: the call would take TryLock past the
	// inliner's budget, and the core's Lock inlines it.
	t := atomic.LoadUint64(w.base) + s>>TokenShift + 1
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

// Token returns the token of the hold this handle has on the word.
func (w *Lock) Token() uint64 {
	return TokenOf(atomic.LoadUint64(w.base), w.state.Load())
}

// TokenOf returns the token of the hold in state s, or of the next hold
// when s is free, over base.
func TokenOf(base, s uint64) uint64 { return base + s>>TokenShift + 1 }

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
	s := w.state.Load()
	return s&^TokenMask == w.me && !w.gone.Load() && w.state.CompareAndSwap(s, Next(w.base, s))
}

// Next returns the token bits of the state that follows the hold in state
// s: one more than the hold's. After the last value it moves the base at
// base up by TokenRound and returns 0 (if the caller's compare-and-swap
// then fails, the move costs a round of tokens nobody was given).
func Next(base *uint64, s uint64) uint64 {
	if s>>TokenShift == tokenLast {
		atomic.AddUint64(base, TokenRound)
		return 0
	}
	return s&TokenMask + TokenOne
}
