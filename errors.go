package baton

import (
	"errors"

	"github.com/batonlock/baton/internal/errs"
)

// Sentinel errors shared by every backend. Backends wrap them with %w and keep
// the cause, so callers match them with errors.Is whatever the backend.
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

	// ErrUpgrade is returned when an owner that holds a read lock asks for
	// the write lock on the same handle. Waiting would deadlock the owner with
	// itself, so the request is refused; release the read lock first.
	ErrUpgrade = errs.Upgrade

	// ErrMismatch reports that a named object exists with other parameters
	// than the caller asked for (a semaphore opened with another capacity).
	ErrMismatch = errs.Mismatch

	// ErrUnsupported is errors.ErrUnsupported: the backend or the platform
	// lacks the mechanism.
	ErrUnsupported = errors.ErrUnsupported
)
