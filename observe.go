package baton

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Observer receives an Event for every operation of the primitives of a
// Backend it is attached to (see Observe): acquisitions as they start and
// end, releases, handoffs between handles, losses and errors. The core calls
// Observe synchronously, in the goroutine of the operation and outside the
// handle's locks (a loss as it fires: in the goroutine that found it, which
// may hold a lock of the backend), so an Observer must be safe for
// concurrent use and quick: count, log, or hand the event off; never call
// the Backend from it.
type Observer interface {
	Observe(Event)
}

// EventType says what an Event reports.
type EventType uint8

const (
	// EventAcquire: an acquisition starts (Lock, TryLock, RLock, TryRLock,
	// Acquire, TryAcquire, or a Cond's Wait for its signal).
	EventAcquire EventType = iota + 1
	// EventAcquired: the acquisition (or the Cond's wait) succeeded after
	// Wait.
	EventAcquired
	// EventFailed: the acquisition (or the Cond's wait) ended without a
	// grant after Wait, with Err.
	EventFailed
	// EventReleased: an Unlock, RUnlock or Release succeeded. For a lock,
	// Held is how long the handle had held the lock (the write hold; for
	// read holds, since the handle's first current reader took it). For a
	// Semaphore Held is 0: permits of a handle are not told apart, so a
	// release cannot be matched with its acquisition.
	EventReleased
	// EventLost: a hold was lost (Err matches ErrLost), reported once per
	// hold. A hold taken while the Backend is observed is reported when its
	// loss fires (the lease expired, the session or the node is gone, the
	// server refused a renewal), with Op "hold", in the goroutine that
	// found the loss (a lease timer, a watch, the caller of Hold.Err), even
	// if the holder never gives it back; its release then reports no
	// second EventLost. A hold found lost only when given back (the loss
	// fired before the Observer was attached, or the release found it)
	// is reported then, with the release's Op. A handle whose holds share
	// one Loss (same-host mechanisms: the file or set of the handle) reports
	// that Loss once.
	EventLost
	// EventPassed: a Mutex hold went from the handle that unlocked it to
	// the next goroutine waiting on another handle of the Backend, with no
	// request to the server (driver.Passer).
	EventPassed
	// EventError: a call of the Backend or of a handle failed with Err (the
	// *Error it returned). A failed acquisition reports EventFailed and
	// EventError.
	EventError
)

var eventNames = [...]string{"", "acquire", "acquired", "failed", "released", "lost", "passed", "error"}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "unknown"
}

// Event is one observation of the core.
type Event struct {
	Type    EventType
	Backend string        // the backend's kind: "local", "redis", ...
	Kind    Kind          // the primitive; "" for the Backend itself
	Name    string        // the name; "" for the Backend itself
	Op      string        // "lock", "rlock", "acquire", "unlock", "wait", "open", "hold" (a loss), ...
	Mode    Mode          // of a lock acquisition or release
	N       int64         // permits, for a Semaphore; for a Queue's EventReleased, 1 when the job became a dead letter
	Wait    time.Duration // EventAcquired, EventFailed: since the acquisition started
	Held    time.Duration // EventReleased
	Token   Token         // EventAcquired: the hold's fencing token
	Err     error         // EventFailed, EventLost, EventError
}

// Observe attaches o to b, a Backend returned by NewBackend (every backend
// constructor of this module returns one), replacing the Observer attached
// before; a nil o detaches it. It applies to the handles b has opened and
// will open. It returns an error matching ErrInvalidArgument for another
// Backend.
//
// An unobserved Backend pays one atomic load per operation for this.
func Observe(b Backend, o Observer) error {
	var cb *coreBackend
	switch x := b.(type) {
	case *coreBackend:
		cb = x
	case *inspectingBackend:
		cb = x.coreBackend
	default:
		return wrapErr("observe", "", "", "", errForeignBackend)
	}
	if o == nil {
		cb.obs.Store(nil)
	} else {
		cb.obs.Store(&observerRef{o})
	}
	return nil
}

var errForeignBackend = fmt.Errorf("%w: not a Backend of baton.NewBackend", ErrInvalidArgument)

// Observers returns an Observer that hands every event to each of os in
// turn (nil ones left out).
func Observers(os ...Observer) Observer {
	var m multiObserver
	for _, o := range os {
		if o != nil {
			m = append(m, o)
		}
	}
	return m
}

type multiObserver []Observer

func (m multiObserver) Observe(e Event) {
	for _, o := range m {
		o.Observe(e)
	}
}

// ErrorClass names the class of an error for counting by kind: "locked",
// "canceled", "deadline", "lost", "closed", "not_held", "invalid",
// "upgrade", "mismatch", "unsupported", "not_found" or "other".
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c.class
		}
	}
	return "other"
}

// errorClasses are the classes of ErrorClass, the first match winning.
var errorClasses = []struct {
	err   error
	class string
}{
	{ErrLocked, "locked"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline"},
	{ErrLost, "lost"},
	{ErrClosed, "closed"},
	{ErrNotHeld, "not_held"},
	{ErrInvalidName, "invalid"},
	{ErrInvalidArgument, "invalid"},
	{ErrUpgrade, "upgrade"},
	{ErrMismatch, "mismatch"},
	{ErrUnsupported, "unsupported"},
	{fs.ErrNotExist, "not_found"},
}

// observerRef boxes the Observer so that one atomic pointer holds it.
type observerRef struct{ o Observer }

// observer returns the Observer attached to b, or nil.
func (b *coreBackend) observer() Observer {
	if r := b.obs.Load(); r != nil {
		return r.o
	}
	return nil
}

// emit hands e, completed with the backend's kind, to o.
func (b *coreBackend) emit(o Observer, e Event) {
	e.Backend = b.kind
	o.Observe(e)
}

// failed wraps a failure as wrapErr does and reports the *Error it makes to
// the observer, if any. A cause that already holds an *Error was reported
// where it was made.
func (b *coreBackend) failed(op string, kind Kind, name string, err error) error {
	if err == nil {
		return nil
	}
	w := wrapErr(op, b.kind, kind, name, err)
	if o := b.observer(); o != nil && w != err {
		b.emit(o, Event{Type: EventError, Kind: kind, Name: name, Op: op, Err: w})
	}
	return w
}

// since is the time since t0, a monoNow reading.
func since(t0 int64) time.Duration { return time.Duration(monoNow() - t0) }
