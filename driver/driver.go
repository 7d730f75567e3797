// Package driver is the contract between baton's core and a backend. A
// backend implements these small interfaces and passes its Backend to
// baton.NewBackend, which gives applications the Mutex, RWMutex, Semaphore
// and Cond of package baton with the same queueing, owners, hold counts,
// validation and error behaviour on every backend. Applications do not use
// this package.
package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/internal/errs"
	"github.com/batonlock/baton/internal/word"
)

// Mode is the mode a lock is asked for; its values are those of baton.Mode.
type Mode uint8

const (
	Exclusive Mode = iota // a write lock or a mutex
	Shared                // a read lock
)

// What the core guarantees to a Lock driver:
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
//     matching baton.ErrLocked when the lock is taken;
//   - Release of a grant whose Loss fired returns an error matching baton.ErrLost
//     and never releases another holder's lock;
//   - errors are bare causes: a sentinel of package baton (wrapped with %w
//     where there is more to say), the context's error, or the backend's
//     own, with no prefix naming the backend, primitive or name (the core
//     wraps every error in one baton.Error that says those).

// Grant is what a driver returns for one acquisition.
type Grant struct {
	Token     uint64
	Recovered bool  // the previous holder died while holding
	Loss      *Loss // nil if the grant cannot be lost
	N         int64 // permits, for semaphore grants
	Data      any   // driver-private state of the grant
}

// Lock is one handle's connection to a named lock in a backend.
// Drivers of plain mutexes are only asked for Exclusive mode.
type Lock interface {
	Acquire(ctx context.Context, mode Mode) (Grant, error)
	TryAcquire(ctx context.Context, mode Mode) (Grant, error)
	Release(ctx context.Context, g Grant) error
	// Downgrade turns an Exclusive grant into a Shared one atomically. Mutex
	// drivers may return baton.ErrUnsupported.
	Downgrade(ctx context.Context, g Grant) (Grant, error)
	Close() error
}

// Semaphore is one handle's connection to a named semaphore. The core
// calls Acquire and TryAcquire one at a time per driver (FIFO), but Release
// may run concurrently with an Acquire in progress.
type Semaphore interface {
	Acquire(ctx context.Context, n int64) (Grant, error)
	TryAcquire(ctx context.Context, n int64) (Grant, error)
	// Release gives back n permits of grant g, 0 < n <= g.N. When n < g.N
	// the rest of the grant stays held (the core keeps g with N reduced).
	Release(ctx context.Context, g Grant, n int64) error
	Capacity() int64
	Close() error
}

// Cond is one handle's connection to a named condition variable. Wait
// is split in two so that the core can register the waiter before it
// releases the lock: a Signal that comes after Prepare returned must wake
// the waiter (no lost wake-up).
type Cond interface {
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

// Backend opens drivers for names the core has already validated. A
// backend that lacks a primitive returns an error matching baton.ErrUnsupported.
// The core may open a second RWMutex driver of a name for one handle: it
// tries a read lock through it, and gives it back at once, to learn whether
// the backend would make a new reader wait (see baton.RWMutex).
type Backend interface {
	// Kind names the backend in errors and diagnostics ("file", "redis").
	Kind() string
	// ValidateName applies rules of the backend beyond ValidateName (for
	// example a shorter limit once the name is encoded). It must not have
	// side effects.
	ValidateName(name string) error
	OpenMutex(ctx context.Context, name string) (Lock, error)
	OpenRWMutex(ctx context.Context, name string) (Lock, error)
	OpenSemaphore(ctx context.Context, name string, permits int64) (Semaphore, error)
	OpenCond(ctx context.Context, name string) (Cond, error)
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

// CloseOnly reports whether only the handle's Close can end ctx: the
// core gives Acquire a context cancelled by Close, and marks it so when the
// caller's context has no end. A driver that makes a request it must not
// abandon half-way, and would otherwise wait for it beside ctx in another
// goroutine, may then make it in the caller's, with its own deadline: Close
// waits for it at most that long.
func CloseOnly(ctx context.Context) bool {
	v, _ := ctx.Value(closeOnlyKey{}).(bool)
	return v
}

// WithCloseOnly marks ctx, which only a Close cancels (see CloseOnly).
func WithCloseOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, closeOnlyKey{}, true)
}

type closeOnlyKey struct{}

// WordLocker is implemented by mutex drivers whose lock is one word in
// memory shared by every process that uses it (the futex mutex). While
// nobody waits, the core then takes and gives back the lock itself, with one
// compare-and-swap each and no call into the driver (package
// internal/word); the driver's Acquire, TryAcquire and Release serve every
// other case, and Release must accept a grant taken on the word.
type WordLocker interface {
	// WordLock returns the handle's word and the Loss that goes with every
	// grant of it. It is called once, when the handle is opened; the word
	// must stay valid, and Release keep working, until the driver is
	// unreachable (after Close too: a goroutine may be taking the word
	// while another closes the handle). It returns a nil word when this
	// handle cannot have a word of its own; the core then calls the driver
	// for every operation.
	WordLock() (*word.Lock, *Loss)
}

// PermitCounter is implemented by semaphore drivers whose permits are a
// count that the handle keeps in memory shared by every process (the
// shared-memory semaphore), so that grants carry nothing of their own.
// While no goroutine of the handle queues or waits in Acquire, the core then
// takes and gives back permits through these methods, from any goroutine at
// once and with no handle lock; Acquire, TryAcquire and Release serve every
// other case. The core calls neither method once it has called Close.
type PermitCounter interface {
	// PermitLoss returns the Loss that goes with every grant. It is called
	// once, when the handle is opened.
	PermitLoss() *Loss
	// TakePermits takes n valid permits when they are free and nobody
	// queues for them, without waiting or a system call, and reports
	// whether it did.
	TakePermits(n int64) bool
	// GivePermits gives back n permits the handle holds, however taken,
	// and returns an error matching baton.ErrLost as Release does.
	GivePermits(n int64) error
}

// Loss is a one-shot signal that a hold can no longer be trusted. A driver
// creates one per hold that can be lost (a lease, a file that can be removed)
// and fires it with the cause; the core hands it to callers through Hold.
//
// A lease's Loss also carries the lease's deadline (SetDeadline), and every
// read of it (Err, Done, and so Hold.Err, Hold.Lost and the context of
// Hold.Context) compares the deadline with the monotonic clock and fires
// the Loss at once when it has passed. A loss is thus seen the moment the
// deadline passes, even when the timers that would fire it have not run (a
// process paused by SIGSTOP or a long GC pause runs them only later).
//
// Use NewLoss (the zero Loss works too). A nil *Loss never fires. A Loss
// makes its channel only when Done is first called, since most are never
// waited on.
//
// The core may Watch a Loss, to report a loss when it fires rather than
// when the hold is given back.
type Loss struct {
	deadline atomic.Int64          // monotonic ns since monoEpoch; 0: none
	err      atomic.Pointer[error] // set once, under mu, before ch is closed
	mu       sync.Mutex
	ch       chan struct{} // guarded by mu; made by the first Done
	// watcher is told when the Loss fires, then replaced by toldMark
	// (which keeps the Loss at 48 bytes where a flag would not); guarded
	// by mu.
	watcher LossWatcher
}

// toldMark stands in a Loss's watcher field once a watcher was told.
type toldMark struct{}

func (toldMark) LossFired(error) {}

// LossWatcher is told that a Loss fired, with the error that Err returns.
// LossFired runs in the goroutine that fires the Loss, which may hold a
// lock of the driver or of its lease keeper: it must be quick and must not
// call the driver.
type LossWatcher interface {
	LossFired(err error)
}

// Watch has w told when l fires. A Loss tells one watcher, once: Watch
// replaces the watcher set before, and when l has fired already and no
// watcher was told of it, w is told at once, in the caller's goroutine.
func (l *Loss) Watch(w LossWatcher) {
	if l == nil || w == nil {
		return
	}
	l.mu.Lock()
	p := l.err.Load()
	if p == nil {
		l.watcher = w
		l.mu.Unlock()
		return
	}
	tell := l.watcher != LossWatcher(toldMark{})
	l.watcher = toldMark{}
	l.mu.Unlock()
	if tell {
		w.LossFired(*p)
	}
}

// Unwatch takes l's watcher off, so that a loss that fires after it tells
// no one, and reports Told.
func (l *Loss) Unwatch() (told bool) {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watcher == LossWatcher(toldMark{}) {
		return true
	}
	l.watcher = nil
	return false
}

// Told reports whether a watcher was told that l fired (by Fire or Watch).
func (l *Loss) Told() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watcher == LossWatcher(toldMark{})
}

// monoEpoch is the origin of Loss deadlines: durations since it are read
// on the monotonic clock.
var monoEpoch = time.Now()

// errDeadline is the cause of a Loss fired by a read past its deadline.
var errDeadline = errors.New("lease deadline passed before a renewal")

// SetDeadline sets the time until which the hold can be trusted; the zero
// time removes the deadline (for a hold given back). t must carry a
// monotonic clock reading (derive it from time.Now). If the deadline in
// force has already passed, the Loss fires instead: a lease that lapsed
// cannot be extended.
func (l *Loss) SetDeadline(t time.Time) {
	if l == nil {
		return
	}
	if l.expired() {
		l.Fire(errDeadline)
		return
	}
	var d int64
	if !t.IsZero() {
		d = max(int64(t.Sub(monoEpoch)), 1)
	}
	l.deadline.Store(d)
}

// expired reports whether the Loss has a deadline that has passed.
func (l *Loss) expired() bool {
	d := l.deadline.Load()
	return d != 0 && int64(time.Since(monoEpoch)) >= d
}

// check fires the Loss if its deadline has passed.
func (l *Loss) check() {
	if l.expired() {
		l.Fire(errDeadline)
	}
}

// NewLoss returns a Loss that has not fired.
func NewLoss() *Loss { return &Loss{} }

// Fire marks the hold lost with cause (which is wrapped so that
// errors.Is(err, baton.ErrLost) holds) and tells the watcher, if any. Only
// the first call has an effect.
func (l *Loss) Fire(cause error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.err.Load() != nil {
		l.mu.Unlock()
		return
	}
	err := errs.Lost
	if cause != nil {
		err = fmt.Errorf("%w: %w", errs.Lost, cause)
	}
	l.err.Store(&err)
	if l.ch != nil {
		close(l.ch)
	}
	w := l.watcher
	if w != nil {
		l.watcher = toldMark{}
	}
	l.mu.Unlock()
	if w != nil {
		w.LossFired(err)
	}
}

// Done returns a channel that is closed when the hold is lost; it is
// already closed if the deadline has passed. It returns nil (a channel that
// never becomes ready) for a nil Loss.
func (l *Loss) Done() <-chan struct{} {
	if l == nil {
		return nil
	}
	l.check()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == nil {
		l.ch = make(chan struct{})
		if l.err.Load() != nil {
			close(l.ch)
		}
	}
	return l.ch
}

// Err returns nil until the Loss fires (or its deadline passes), and then an
// error matching baton.ErrLost that wraps the cause.
func (l *Loss) Err() error {
	if l == nil {
		return nil
	}
	l.check()
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// ErrForeignGrant is the error of a driver handed a grant it did not
// return (another driver's, or an empty one). The core never does that; a
// caller that uses a driver directly can.
var ErrForeignGrant = fmt.Errorf("%w: a grant this driver did not return", errs.InvalidArgument)

// DataOf returns the driver-private state of g, which a driver of type T
// put in Grant.Data, or ErrForeignGrant: the one check every driver makes
// of a grant handed back to it.
func DataOf[T any](g Grant) (*T, error) {
	d, ok := g.Data.(*T)
	if !ok || d == nil {
		return nil, ErrForeignGrant
	}
	return d, nil
}
