package driver

import "context"

// ValueOpener is implemented by backends that serve versioned values
// (baton.Value). It is optional: for a backend without it the core returns
// an error matching baton.ErrUnsupported from Backend.Value.
type ValueOpener interface {
	// OpenValue opens a driver for a name the core has validated.
	OpenValue(ctx context.Context, name string) (Value, error)
}

// Value is one handle's connection to a named versioned value.
//
// What the core guarantees to a Value driver:
//   - ctx is not nil, data is at most baton.MaxValueSize bytes (nil for
//     empty data), and the handle is open when a call starts;
//   - Close is called once, after every call in progress has returned; a
//     Wait in progress is ended first by cancelling its context.
//
// What a driver guarantees to the core:
//   - versions of a name strictly increase with each successful
//     CompareAndSwap, across handles and processes; 0 is never written;
//   - CompareAndSwap writes atomically (a reader sees all of the old data
//     or all of the new) and returns an error matching baton.ErrConflict,
//     with the version it found, when the version is not old, having
//     changed nothing;
//   - Wait returns once the version differs from v (at once if it does),
//     woken by the backend rather than by polling where the backend can
//     notify, and promptly with ctx's error once ctx is done;
//   - returned data is not retained or shared by the driver; the data
//     given to CompareAndSwap is not retained after it returns;
//   - errors are bare causes, as for the other drivers.
type Value interface {
	Load(ctx context.Context) (data []byte, version uint64, err error)
	CompareAndSwap(ctx context.Context, old uint64, data []byte) (version uint64, err error)
	Wait(ctx context.Context, v uint64) (data []byte, version uint64, err error)
	Close() error
}
