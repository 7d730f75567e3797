// Package mutex is a robust mutex on a futex word in shared memory, for the
// processes of one host.
//
// A Mutex is a lock on a 32-bit futex word in a shared mapping of a file of
// the namespace (kind directory "futex"). Locking an unheld mutex is one
// compare-and-swap with no system call; a waiter sleeps in FUTEX_WAIT and an
// unlock that saw waiters makes one FUTEX_WAKE.
//
// # Owner identity and death
//
// The futex word is the low half of a 64-bit state word. An acquisition is
// one 64-bit compare-and-swap that writes, at the same instant, the lock bit
// pattern (the owner's pid, 22 bits, which is every pid Linux can give, and
// 7 bits naming the handle among the process's handles of the file, so
// that one handle cannot release another's hold; past 127 live handles of
// one name in a process, a new handle gets none and is served without the
// word path) and, in the high half, the low 24 bits of the owner's start
// time (/proc/PID/stat field 22). There is no moment in which the lock is
// taken but its owner unknown: a process killed right after the swap is
// recorded as the owner. The top 8 bits of the high half are the low bits
// of the lock's tokens (see Fencing).
//
// A waiter watches the owner recorded in the state before it sleeps
// (ipc.Waiter: a pidfd of the owner, parked in Go's poller) and sleeps in
// FUTEX_WAIT with no timeout; an unlock or the owner's exit ends the sleep.
// It then checks that owner: the process must exist, have the recorded
// start time and not be a zombie or exiting (kill(pid, 0) succeeds on a
// zombie, which never runs again). A process that got the dead owner's pid
// later has another start time, so PID reuse cannot keep a lock held (two
// start times with the same low 24 bits are 2^24 clock ticks apart, 46
// hours at 100 Hz: a process that got the pid that long after the owner
// died, with nobody having tried the lock meanwhile, keeps it held until
// it exits, with a chance of one in 2^24). A
// waiter that finds the owner dead takes the lock over with a
// compare-and-swap against the exact state it inspected, and its grant
// reports Recovered: the protected state may be half-updated. A waiting
// process uses no CPU, however long it waits.
//
// Why not the kernel's robust-futex list: it is kept per thread, and the
// kernel releases a robust futex when the thread that holds it exits. A
// goroutine is not a thread; a lock taken on one thread may be unlocked on
// another, and Go threads come and go under the scheduler. Using the list
// would mean pinning the goroutine to its thread from Lock to Unlock (and the
// runtime kills pinned threads whose goroutine exits), and still mistaking
// an exiting thread for a dead process. Process identity is what dies with
// a process, so it is what the lock records; the kernel tells a waiter
// when it exits.
//
// # Fairness
//
// Unlocking is not a handoff by default: the unlocking process may take the
// lock again before a woken waiter runs, which keeps throughput high. A
// waiter that has waited more than starveAfter sets the starving bit; the
// next unlock then hands the lock to the waiters (the handoff bit): no
// process that has not slept on the lock may take it, and the first waiter
// to run after its wake-up does. So a waiter is passed over for at most
// about starveAfter plus one hold, as with sync.Mutex's starvation mode.
//
// # Through the baton core
//
// The Mutex is a driver.WordLocker: while nobody waits, the core takes and
// gives back the word itself (one compare-and-swap each, which is what makes
// an uncontended Lock+Unlock cost about as much as sync.Mutex), and calls
// Acquire and Release for everything else. The word keeps one more field for
// the core, the owner of the hold within its handle.
//
// # Fencing
//
// A hold's token is a 64-bit base in the file plus the token bits of the
// state plus one. The compare-and-swap that takes the lock keeps the bits
// it found, and the one that gives it back (or takes over a dead owner's
// hold) writes them one higher, so drawing a token costs no atomic of its
// own. When the bits have gone round, whoever ends that hold first moves
// the base up by their range: tokens follow on one by one. The base is
// read after the acquiring compare-and-swap, and only grows. It lives in
// the file, so tokens keep increasing across restarts of every process,
// and across reclaims of the file: a reclaim raises the namespace's token
// floor to the last token given before the file goes, and a new file's
// base starts at the floor (and is lifted to it again by every process
// that maps it).
//
// # Handles and reclaim
//
// The handles of a name in a process share one mapping of its file and
// one descriptor (ipc.OpenShared), so a handle on a name already open costs
// no system call; each handle still has its own handle bits, so two
// handles exclude each other as two processes do. The last handle of the
// host to close removes the file when nobody owns the lock (a dead owner's
// hold stays for a waiter to recover, with Recovered), at once or after
// the namespace's linger (ipc.Namespace.SetLinger): what idle names leave
// behind is bounded however many were used. A process holds a shared
// flock of the file while it has a handle open, which is how the closer
// knows that no other process does; see ipc.OpenShared for why an opener
// can never end up on a file that was reclaimed under it.
//
// # What failures leave behind
//
// A process that dies holding the lock leaves it held until a waiter (or a
// TryAcquire) notices the death. A waiter killed while sleeping leaves
// nothing held; the approximate waiter count shown by Inspect may stay
// one too high. A waiter killed between its wake-up and its claim of a
// handoff leaves the handoff unclaimed: it is void after handoffGrace,
// and any caller then takes the lock. (Without a handoff, such a death
// leaves the lock free with its waiters asleep until the next Lock of
// the name, which wakes the next one when it unlocks.) Removing the file (Remove) while the lock is held
// leaves the holder with a mapping nobody else opens: new openers get a new
// lock, so the old hold is not exclusive any more. A watcher of the file
// notices the removal and fires the loss of every grant of the handle.
package mutex

import (
	"time"

	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// Kind is the namespace directory of futex mutexes.
const Kind = "futex"

// what names the primitive in errors about its file.
const what = "futex mutex"

const (
	mutexSize    = 64
	mutexMagic   = 0x62746d32 // "btm2"
	offMagic     = 0          // uint32
	offState     = 8          // uint64; its low half is the futex word
	offFence     = 16         // uint64: the base of the tokens (see word.TokenBits)
	offWaiters   = 24         // int32: handles in the slow path of Acquire (approximate)
	offSlot      = 32         // uint64: the word's owner slot (internal/word), the owner of a hold within its handle
	offHandoffAt = 40         // int64: CLOCK_MONOTONIC ns of the last handoff
	pidBits      = 22
	pidMask      = 1<<pidBits - 1
	fWaiters     = 1 << 22                    // a waiter may sleep in FUTEX_WAIT: unlock must wake one
	fHandoff     = 1 << 23                    // free, but only for a waiter that has slept
	fStarving    = 1 << 24                    // a waiter waited more than starveAfter: hand off at unlock
	handleShift  = 25                         // bits 25..31: which handle of the owner process holds
	handleMax    = ipc.MaxField               // the field is the region's (ipc.Region.TakeField)
	tagMask      = 1<<(32-word.TokenBits) - 1 // the bits of the owner's start time the state keeps
	ownerMask    = tagMask<<32 | handleMax<<handleShift | pidMask
	lowHalf      = 0xffffffff
	starveAfter  = time.Millisecond
	// handoffGrace is how long a handoff stays reserved for the waiters
	// that slept; a waiter killed right after its wake-up leaves one that
	// nobody would claim.
	handoffGrace = 20 * time.Millisecond
	maxSpin      = 64
	maxTryAgain  = 8
	pidMaxLinux  = 1 << pidBits
)
