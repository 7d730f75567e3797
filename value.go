package baton

import "context"

// MaxValueSize is the largest data, in bytes, that a Value holds on every
// backend (what one page of same-host shared memory holds, and small enough
// for one Redis or etcd request). CompareAndSwap refuses more with
// ErrInvalidArgument before any side effect.
const MaxValueSize = 4096

// Value is a named small value with a version: an optimistic lock. Every
// process that opens the same name on the same backend sees the same data
// and version. A write is a CompareAndSwap against the version the writer
// last saw, so of several writers racing from one version exactly one
// succeeds and the others get ErrConflict and can Load and try again.
//
// Versions are opaque numbers, not counts of writes: 0 means never written,
// and each successful write gives a version greater than every version
// given before for the name, for as long as the backend keeps the name (see
// each backend's documentation for what survives a restart). A version is
// therefore never reused: a CompareAndSwap against a version read before
// any later write fails, whatever the data is now.
//
// A handle is safe for concurrent use. Data passed in and returned is the
// caller's own (copied). A call whose context is already done returns the
// context's error and changes nothing. An error other than ErrConflict from
// CompareAndSwap (a network error, the context ended) leaves the outcome
// unknown: the write may have happened; Load tells.
type Value interface {
	// Name returns the name the handle was opened with.
	Name() string
	// Load returns the current data and version; a value never written
	// has version 0 and nil data.
	Load(ctx context.Context) (data []byte, version uint64, err error)
	// CompareAndSwap writes data (at most MaxValueSize bytes; nil is
	// empty data) if the version is still old (0: only if never written)
	// and returns the new version. Otherwise it changes nothing and
	// returns the version it found with an error matching ErrConflict.
	CompareAndSwap(ctx context.Context, old uint64, data []byte) (version uint64, err error)
	// Wait blocks until the version differs from v, or ctx ends, and
	// returns the data and version then (at once if they differ already).
	// It waits for the backend's notification (a futex, Pub/Sub, a
	// watch), not by polling.
	Wait(ctx context.Context, v uint64) (data []byte, version uint64, err error)
	// Close releases the handle; a Wait in progress returns ErrClosed.
	// The value itself stays.
	Close() error
}
