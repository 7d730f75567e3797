package baton

import "context"

// Locker is what a Cond waits with: any baton lock in exclusive mode
// (a Mutex, or the write side of an RWMutex).
type Locker interface {
	Lock(ctx context.Context) (Hold, error)
	Unlock(ctx context.Context) error
}

// Mutex is a named mutual-exclusion lock shared by goroutines, processes and
// machines that open the same name on the same backend.
//
// A handle is safe for concurrent use: goroutines that share one handle
// exclude each other exactly as separate processes do. Locking is reentrant
// only by owner (see WithOwner); without an owner a second Lock waits.
//
// Lock waits until the lock is held or ctx is done; on failure it returns an
// error (matching ctx.Err() when the context ended) and holds nothing. A
// context already done when the lock is granted wins, as in Semaphore: the
// lock is given back and Lock returns the context's error, so a cancel made
// before the Unlock that would have let the waiter in always makes Lock fail.
// TryLock never waits: it returns ErrLocked when the lock is taken. Unlock
// releases one hold of the caller's owner; it returns ErrNotHeld when there is
// none and ErrLost (after releasing what it can) when the hold was lost.
type Mutex interface {
	Locker
	TryLock(ctx context.Context) (Hold, error)
	// Name returns the name the handle was opened with.
	Name() string
	// Close releases the handle. Holds still held are released; waiters
	// return ErrClosed.
	Close() error
}

// RWMutex is a named reader/writer lock. Writers are preferred: once a writer
// waits, new readers wait behind it (an owner that already holds a read lock
// may still take more, so that reentrant readers cannot deadlock). A reader
// never waits while no writer holds or waits, on any handle or process, so
// code that is correct with sync.RWMutex is correct here.
//
// The readers of one handle share one read grant of the backend. For a short
// window after the grant was taken, a new reader of the handle joins it at
// once; after that it joins only if no writer of the handle is queued ahead
// of it and the backend confirms that no writer holds or waits elsewhere
// (the handle tries a read lock through a second connection of its own and
// gives it back, so the backend's own writer preference decides; a success
// opens another window). Otherwise the reader waits until the handle's
// readers have drained and the writer has had its turn. A stream of readers
// on one handle therefore cannot starve a writer of another.
//
// An owner holding the write lock may take read locks too and keeps the
// write lock; when its last write hold is unlocked while read holds remain,
// the lock is downgraded atomically. An owner holding only read locks that
// asks for the write lock gets ErrUpgrade at once. Without an owner the
// handle cannot tell that the caller of Lock holds a read lock (Go has no
// goroutine identity), so RLock then Lock waits for ever, as with
// sync.RWMutex.
type RWMutex interface {
	Mutex
	RLock(ctx context.Context) (Hold, error)
	TryRLock(ctx context.Context) (Hold, error)
	RUnlock(ctx context.Context) error
	// Downgrade turns the caller's write hold into a read hold with no
	// moment in which another writer could take the lock. The write lock
	// must be held exactly once by the caller's owner.
	Downgrade(ctx context.Context) (Hold, error)
}

// Semaphore is a named counting semaphore with a capacity fixed when the
// name is first created; every later opener must ask for the same capacity
// (ErrMismatch otherwise).
//
// Acquire(ctx, n) waits for n permits; waiters of one handle are served in
// FIFO order, so a large request is not starved by small ones. On failure it
// returns an error and leaves the semaphore unchanged. A context done before
// the permits are granted wins, also when the grant races the cancellation:
// permits that arrive once ctx is done are given back and Acquire returns
// ctx.Err() (as golang.org/x/sync/semaphore does), so a cancel made before the
// Release that frees the permits always makes Acquire fail. Release(n) gives
// back n of the permits this handle holds; releasing more than held is
// ErrNotHeld. Permits of a process that dies come back (by the kernel or by
// lease expiry, depending on the backend).
type Semaphore interface {
	Acquire(ctx context.Context, n int64) (Hold, error)
	TryAcquire(ctx context.Context, n int64) (Hold, error)
	Release(ctx context.Context, n int64) error
	// Capacity returns the number of permits of the semaphore.
	Capacity() int64
	Name() string
	Close() error
}

// Cond is a named condition variable. Wait releases l, waits for Signal or
// Broadcast on the same name (from any process of the backend), and locks l
// again before returning, also when ctx ends first (then it returns the
// context's error). There is no lost wake-up: a Signal made after Wait
// released l wakes it. As with sync.Cond, wake-ups may be spurious from the
// caller's point of view; re-check the condition in a loop.
//
// l must be held exactly once by the caller.
type Cond interface {
	Wait(ctx context.Context, l Locker) error
	// Signal wakes one waiter, if there is one.
	Signal(ctx context.Context) error
	// Broadcast wakes every waiter.
	Broadcast(ctx context.Context) error
	Name() string
	Close() error
}

// Backend opens named primitives. Handles opened by one Backend are
// independent of each other (two handles on one name exclude each other like
// two processes do). Close closes every handle it opened.
//
// Every constructor validates its arguments before any side effect and
// returns ErrInvalidName or ErrInvalidArgument. A backend that lacks a
// primitive returns an error matching ErrUnsupported.
type Backend interface {
	Mutex(ctx context.Context, name string) (Mutex, error)
	RWMutex(ctx context.Context, name string) (RWMutex, error)
	Semaphore(ctx context.Context, name string, permits int64) (Semaphore, error)
	Cond(ctx context.Context, name string) (Cond, error)
	// Channel opens a channel of messages (see Channel), creating it with
	// o when it does not exist. Backends without channels return an
	// error matching ErrUnsupported.
	Channel(ctx context.Context, name string, o ChannelOptions) (Channel, error)
	// Value opens a versioned value (see Value). Backends without one
	// return an error matching ErrUnsupported.
	Value(ctx context.Context, name string) (Value, error)
	// Queue opens a work queue (see Queue). Backends without one return
	// an error matching ErrUnsupported.
	Queue(ctx context.Context, name string) (Queue, error)
	Close() error
}
