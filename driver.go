package baton

import "context"

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

// FastLocker is implemented by mutex drivers whose uncontended acquisition
// and release need no context, no error value and no system call (a CAS on
// a word in shared memory). The core calls these without its handle lock,
// possibly while another goroutine of the same handle is inside Acquire or
// Release of the same driver, so they must be safe for that. For the same
// reason such a driver must accept a Release (of a fast hold the owner
// locked again) while another goroutine of the handle is inside Acquire.
type FastLocker interface {
	// TryAcquireFast takes the lock in Exclusive mode if that needs no
	// waiting and no system call, and reports false otherwise (the core then
	// takes its regular path).
	TryAcquireFast() (Grant, bool)
	// ReleaseFast releases g if that needs no system call (no waiter to
	// wake), and otherwise reports false and changes nothing.
	ReleaseFast(g Grant) bool
}
