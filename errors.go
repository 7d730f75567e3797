package baton

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/batonlock/baton/internal/errs"
)

// Sentinel errors shared by every backend. The errors the core returns are
// *Error values wrapping them (with the backend's cause, if any), so callers
// match them with errors.Is whatever the backend.
var (
	// ErrNotHeld is returned by Unlock, RUnlock, Release and Downgrade when
	// the caller does not hold what it releases (never locked, already
	// unlocked, or held by another owner).
	ErrNotHeld = errs.NotHeld

	// ErrLost reports that a hold can no longer be trusted: its lease expired,
	// its session ended, or the object behind it was removed or replaced.
	// The caller must assume that someone else may hold the lock.
	ErrLost = errs.Lost

	// ErrLocked is returned by TryLock, TryRLock and TryAcquire when the call
	// would have to wait.
	ErrLocked = errs.Locked

	// ErrClosed is returned by every call on a closed handle or backend.
	ErrClosed = errs.Closed

	// ErrInvalidName reports a name that the backend refuses; nothing was
	// created.
	ErrInvalidName = errs.InvalidName

	// ErrInvalidArgument reports a count, duration, option or context that
	// is out of range; nothing was changed.
	ErrInvalidArgument = errs.InvalidArgument

	// ErrUpgrade is returned when an owner (WithOwner) that holds a read
	// lock asks for the write lock on the same handle. Waiting would deadlock
	// the owner with itself, so the request is refused; release the read
	// lock first. Without an owner the handle cannot tell the caller from
	// another reader, and Lock waits as sync.RWMutex's does.
	ErrUpgrade = errs.Upgrade

	// ErrMismatch reports that a named object exists with other parameters
	// than the caller asked for (a semaphore opened with another capacity).
	ErrMismatch = errs.Mismatch

	// ErrConflict is returned by Value.CompareAndSwap when the value's
	// version is not the one the caller gave: someone else wrote it first.
	// Nothing was written.
	ErrConflict = errs.Conflict

	// ErrUnsupported is errors.ErrUnsupported: the backend or the platform
	// lacks the mechanism.
	ErrUnsupported = errors.ErrUnsupported
)

// MismatchError is the cause of an error matching ErrMismatch when a
// semaphore exists with another capacity: it names the existing capacity
// (Have, 0 when the backend cannot tell) and the one asked for (Want), the
// same on every backend:
//
//	baton: redis semaphore "gpu": open: exists with capacity 2, not 3
type MismatchError = errs.MismatchError

// Error is the error of every failed call of a Backend or of a handle it
// opened: which operation failed, on which backend, primitive and name, and
// why. errors.Is and errors.As see through it to the cause, so
// errors.Is(err, ErrLocked) and errors.Is(err, context.Canceled) hold for an
// *Error as for its cause. Its text is
//
//	baton: redis mutex "jobs/a": lock: context deadline exceeded
//	baton: local: close: <cause>                  (the Backend itself)
//
// Drivers return bare causes; the core adds this one wrapper.
type Error struct {
	Op      string // "lock", "trylock", "unlock", "rlock", "acquire", "release", "wait", "signal", "open", "close", ...
	Backend string // the backend's kind: "local", "redis", "etcd", ...
	Kind    Kind   // the primitive; "" for an error of the Backend itself
	Name    string // the name; "" for an error of the Backend itself
	Err     error  // the cause
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("baton: ")
	b.WriteString(e.Backend)
	if e.Kind != "" {
		b.WriteByte(' ')
		b.WriteString(string(e.Kind))
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.Name))
	}
	b.WriteString(": ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.cause())
	}
	return b.String()
}

// driverLabels are the prefixes with which the project's drivers may start
// a cause's text, naming their package.
var driverLabels = []string{"redislock", "redlock", "etcdlock", "pglock", "mysqllock", "zklock", "lease", "local", "ipc"}

// cause returns the text of e.Err without the layers that repeat what e
// says already: "baton: " (the sentinels say it), the driver's package or
// backend, the operation, and the primitive with its name. So the cause
// reads once, however many layers built it.
func (e *Error) cause() string {
	s := e.Err.Error()
	var prefixes []string
	prefixes = append(prefixes, "baton: ", e.Backend+": ")
	for _, l := range driverLabels {
		prefixes = append(prefixes, l+": ")
	}
	if e.Kind != "" {
		obj := string(e.Kind) + " " + strconv.Quote(e.Name) + ": "
		if e.Op != "" {
			prefixes = append(prefixes, e.Op+" "+obj)
		}
		prefixes = append(prefixes, obj)
	}
	if e.Op != "" {
		prefixes = append(prefixes, e.Op+": ")
	}
	for trimmed := true; trimmed; {
		trimmed = false
		for _, p := range prefixes {
			if p != ": " && strings.HasPrefix(s, p) && len(s) > len(p) {
				s, trimmed = s[len(p):], true
			}
		}
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// wrapErr returns err as an *Error, or err itself if it is nil or already
// carries one (a driver or a nested call of the core made it).
func wrapErr(op, backend string, kind Kind, name string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Backend: backend, Kind: kind, Name: name, Err: err}
}

// errNilContext is the cause for a nil context.
var errNilContext = fmt.Errorf("%w: nil context", ErrInvalidArgument)

// isAny reports whether err matches one of targets.
func isAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
