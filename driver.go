package baton

import (
	"context"
	"sync/atomic"
)

// The driver contract. A backend implements these small interfaces; the core
// (NewBackend) turns them into the Mutex, RWMutex, Semaphore and Cond that
// applications use, with the same queueing, owners, hold counts, validation
// and error behaviour on every backend.
//
// What the core guarantees to a LockDriver:
//   - names and arguments are validated before Open* is called;
//   - at most one call of Acquire, TryAcquire, Release or Downgrade is in
//     progress on one driver at a time, and the driver holds at most one
//     grant at a time (goroutines sharing a handle are queued in front of it,
//     and local readers share one Shared grant);
//   - Release and Downgrade receive the grant the driver returned.
//
// What a driver guarantees to the core:
//   - Acquire returns promptly (milliseconds) once ctx is done, with an error
//     matching ctx.Err(), and holds nothing then;
//   - TryAcquire never waits for another holder and returns an error
//     matching ErrLocked when the lock is taken;
//   - Release of a grant whose Loss fired returns an error matching ErrLost
//     and never releases another holder's lock;
//   - errors wrap the sentinels of this package with %w.

// Grant is what a driver returns for one acquisition.
type Grant struct {
	Token     Token
	Recovered bool  // the previous holder died while holding
	Loss      *Loss // nil if the grant cannot be lost
	N         int64 // permits, for semaphore grants
	Data      any   // driver-private state of the grant
}

// LockDriver is one handle's connection to a named lock in a backend.
// Drivers of plain mutexes are only asked for Exclusive mode.
type LockDriver interface {
	Acquire(ctx context.Context, mode Mode) (Grant, error)
	TryAcquire(ctx context.Context, mode Mode) (Grant, error)
	Release(ctx context.Context, g Grant) error
	// Downgrade turns an Exclusive grant into a Shared one atomically. Mutex
	// drivers may return ErrUnsupported.
	Downgrade(ctx context.Context, g Grant) (Grant, error)
	Close() error
}

// SemaphoreDriver is one handle's connection to a named semaphore. The core
// calls Acquire and TryAcquire one at a time per driver (FIFO), but Release
// may run concurrently with an Acquire in progress.
type SemaphoreDriver interface {
	Acquire(ctx context.Context, n int64) (Grant, error)
	TryAcquire(ctx context.Context, n int64) (Grant, error)
	// Release gives back n permits of grant g, 0 < n <= g.N. When n < g.N
	// the rest of the grant stays held (the core keeps g with N reduced).
	Release(ctx context.Context, g Grant, n int64) error
	Capacity() int64
	Close() error
}

// CondDriver is one handle's connection to a named condition variable. Wait
// is split in two so that the core can register the waiter before it
// releases the lock: a Signal that comes after Prepare returned must wake
// the waiter (no lost wake-up).
type CondDriver interface {
	// Prepare registers the caller as a waiter and returns a ticket.
	Prepare(ctx context.Context) (any, error)
	// Wait blocks until the ticket is signalled or ctx is done. On ctx
	// done it withdraws the registration (a Signal consumed by a
	// withdrawn waiter is passed on, or reported as spurious to nobody) and
	// returns an error matching ctx.Err().
	Wait(ctx context.Context, ticket any) error
	// Cancel withdraws a registration that will not be waited on.
	Cancel(ticket any)
	Signal(ctx context.Context) error
	Broadcast(ctx context.Context) error
	Close() error
}

// BackendDriver opens drivers for names the core has already validated. A
// backend that lacks a primitive returns an error matching ErrUnsupported.
// The core may open a second RWMutex driver of a name for one handle: it
// tries a read lock through it, and gives it back at once, to learn whether
// the backend would make a new reader wait (see RWMutex).
type BackendDriver interface {
	// Kind names the backend in errors and diagnostics ("file", "redis").
	Kind() string
	// ValidateName applies rules of the backend beyond ValidateName (for
	// example a shorter limit once the name is encoded). It must not have
	// side effects.
	ValidateName(name string) error
	OpenMutex(ctx context.Context, name string) (LockDriver, error)
	OpenRWMutex(ctx context.Context, name string) (LockDriver, error)
	OpenSemaphore(ctx context.Context, name string, permits int64) (SemaphoreDriver, error)
	OpenCond(ctx context.Context, name string) (CondDriver, error)
	Close() error
}

// TryFirst is implemented by lock and semaphore drivers whose TryAcquire
// costs no more than the first step of Acquire (a local syscall or a memory
// operation, not a network round trip) and returns true. The core then tries
// first when the handle is idle, and sets up a cancellable wait only when
// the lock is taken.
type TryFirst interface {
	TryFirst() bool
}

// WordLocker is implemented by mutex drivers whose lock is one 64-bit word in
// memory shared by every process that uses it (a futex mutex). While nobody
// waits, the core then takes and gives back the lock itself, with one
// compare-and-swap each and no call into the driver; the driver's Acquire,
// TryAcquire and Release serve every other case.
type WordLocker interface {
	// WordLock returns the description of the word. It is called once, when
	// the handle is opened; the pointers must stay valid, and Release must
	// keep working, until the driver is unreachable (after Close too: a
	// goroutine may be taking the word while another closes the handle).
	// It returns nil when this handle cannot have a Me of its own; the core
	// then calls the driver for every operation.
	WordLock() *WordLock
}

// WordLock describes the shared word of a WordLocker. The core uses it thus:
//
//   - State 0 means free with no process waiting, and State&Mask == Me
//     means held by this handle (Me differs between handles of one process,
//     so that no handle can release another's hold). The core acquires with
//     State.CompareAndSwap(0, Me) and releases with CompareAndSwap(Me, 0);
//     when that fails (other bits set: waiters to wake, a handoff) it calls
//     the driver's Release, which must accept a grant taken on the word.
//   - Fence holds the last token given. Only the holder writes it: the core
//     increments it after its own compare-and-swap, the driver after its
//     own acquisitions.
//   - Slot belongs to the core, which records there the owner of the
//     handle's hold; only the holder writes it, and the driver never does.
//   - Gone reports that the word is no longer shared (its file was removed):
//     the core then leaves the release to the driver, which reports Loss.
//   - Loss goes with every grant of the word.
//   - Sync is ordinary memory, one per lock and process: the core's
//     acquisitions and releases touch it in builds with the race detector,
//     which does not see synchronization through memory outside the Go
//     heap.
type WordLock struct {
	State *atomic.Uint64
	Mask  uint64
	Me    uint64
	Fence *uint64
	Slot  *uint64
	Gone  *atomic.Bool
	Loss  *Loss
	Sync  *atomic.Uint64
}
