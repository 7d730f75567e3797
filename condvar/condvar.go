// Package condvar is a condition variable for processes of one host: a
// table of waiter slots in a shared mapping of a file of an ipc.Namespace,
// each slot a futex word of its own.
//
// A Cond implements driver.Cond; baton.NewBackend (through the local
// backend) turns it into a baton.Cond that works with any baton lock.
//
// # Guarantees
//
//   - No lost wake-up: Prepare claims a slot marked waiting before it
//     returns; a Signal or Broadcast that starts after Prepare returned sees
//     the slot and wakes it (FUTEX_WAIT compares the slot word, so a signal
//     that lands between the check and the sleep is not missed).
//   - Signal with no waiter is one atomic load: no system call.
//   - Exactly one per Signal: Signal moves one slot from waiting to
//     signalled with a compare-and-swap and wakes that slot's futex only.
//     Each Signal is consumed by exactly one waiter that was registered
//     when the Signal chose it, in order of registration (the oldest
//     waiter first, as far as concurrent registrations are ordered). A
//     waiter whose context ends after it was signalled passes the signal
//     on to the next waiter; one whose context ends before withdraws its
//     slot, which no later Signal can choose.
//   - Broadcast signals every slot waiting when it scans.
//   - A Wait returns nil only after a Signal or Broadcast chose its slot; the
//     wake-ups of a baton.Cond are spurious only in the sense of sync.Cond
//     (the condition may be false again by the time the lock is re-taken).
//
// # Failures
//
// A waiter that is SIGKILLed while waiting leaves its slot waiting. Signal
// checks the owner of the slot it chooses when that owner is another
// process (through /proc, see ipc.ProcWatch: gone, zombie, exiting or a
// reused pid count as dead), frees a dead owner's slot and chooses the next:
// a dead waiter never absorbs a Signal. A waiter killed after a Signal chose
// it and before it returned takes that signal with it, like a process
// killed just after Wait returned; Signal notices such slots and passes
// their signal on when it finds no live waiting slot but slots in use.
// Broadcast marks dead waiters' slots signalled; they are freed by later
// sweeps. A process killed in the instant between claiming a slot and
// raising the bound (see Capacity) leaves a slot that Signal does not
// look at; Prepare sweeps the whole table before it gives up, which frees
// it.
//
// # Capacity
//
// There are Slots slots per name. Prepare takes the lowest free slot and
// then raises a bound above it; whoever frees the highest slot in use
// lowers the bound again. Signal and Broadcast scan only below the bound,
// so a name with few waiters costs few loads however large the table, and
// Signal with no waiter finds the bound at zero. Prepare returns an error
// when all slots are in use by live waiters. The file of a name has the size of this table; a file of
// another size is refused with baton.ErrMismatch.
//
// The zero Cond is not usable; use Open.
package condvar

import "github.com/batonlock/baton/driver"

// Slots is the number of waiters one name can have at a time.
const Slots = 4096

// Kind is the namespace directory of condition variables.
const Kind = "cond"

const (
	hdrSize  = 64
	slotSize = 16
	fileSize = hdrSize + Slots*slotSize
	magic    = 0x62746332 // "btc2"; a file of another layout has another size too

	offMagic = 0  // uint32
	offBound = 8  // uint64: a change count << 16 | the bound
	offOrder = 16 // uint64: registration counter

	// Every slot in use (waiting or signalled) whose Prepare has returned
	// is below the bound. Each change of the bound word also advances its
	// change count, so a lowering computed from a scan fails its
	// compare-and-swap when a Prepare raised the bound after the scan
	// began: that Prepare's slot may be one the scan saw free.
	boundMask = 1<<16 - 1

	// A slot is a uint64 state word and a uint64 registration order. The
	// low half of the state word is the slot's futex word: owner pid (22
	// bits) and the status bits; the high half is the owner's start time
	// tag (ipc.Proc.Tag). 0 is a free slot.
	pidBits    = 22
	pidMask    = 1<<pidBits - 1
	sWaiting   = 1 << 22
	sSignalled = 1 << 23
	// sKick is set by the owner process to end its own wait (the caller's
	// context ended, or the handle closed). A futex wake alone is lost
	// when it comes after the waiter last looked and before it sleeps; a
	// changed word is not: FUTEX_WAIT then returns at once.
	sKick   = 1 << 24
	sStatus = sWaiting | sSignalled | sKick
)

var _ driver.Cond = (*Cond)(nil)
