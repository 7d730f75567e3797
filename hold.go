package baton

import (
	"context"

	"github.com/batonlock/baton/driver"
)

// Token is a fencing token: every exclusive acquisition of a name returns a
// token strictly greater than every token given before for that name, by
// every process and machine that uses the same backend, across restarts of
// the holders. A resource that remembers the highest token it has accepted
// can refuse a stale holder whose lock was lost.
//
// Shared holds (read locks, semaphore permits) carry the token of the backend
// where it has one, and 0 where it has none.
type Token uint64

// Mode is the mode a lock is held in.
type Mode uint8

const (
	Exclusive Mode = iota // a write lock or a mutex
	Shared                // a read lock
)

func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// Hold describes one acquisition: its fencing token, whether the previous
// holder died while holding, and the signal that fires if the hold is lost.
// A Hold is a small value; copying it is cheap. Reentrant acquisitions by the
// same owner return the Hold of the outermost acquisition.
//
// Holding is never certain for a lease-based backend: a process can pause
// (GC, SIGSTOP, a slow disk) past its lease. Check Lost or Err before every
// action that must not happen without the lock, and pass Token to the
// resource, which should refuse tokens older than the newest it has seen.
type Hold struct {
	token     Token
	mode      Mode
	recovered bool
	loss      *driver.Loss
}

// newHold is the core's constructor of a Hold.
func newHold(token Token, mode Mode, recovered bool, loss *driver.Loss) Hold {
	return Hold{token: token, mode: mode, recovered: recovered, loss: loss}
}

// Token returns the fencing token of the acquisition.
func (h Hold) Token() Token { return h.token }

// Mode reports whether the hold is exclusive or shared.
func (h Hold) Mode() Mode { return h.mode }

// Recovered reports that the previous holder died while holding the lock
// (like EOWNERDEAD for a robust mutex): the state the lock protects may be
// half-updated and may need repair before use.
func (h Hold) Recovered() bool { return h.recovered }

// Lost returns a channel that is closed if the hold is lost while held. For
// holds that cannot be lost it returns nil, which never becomes ready. The
// channel is not closed by a normal Unlock. For a lease, the channel is
// already closed when Lost is called after the lease's local deadline: the
// hold is reported lost before any other client can be granted the lock,
// even if this process was paused and its timers have not run yet.
func (h Hold) Lost() <-chan struct{} { return h.loss.Done() }

// Err returns nil while the hold is trusted and an error matching ErrLost
// once it is lost. For a lease it compares the lease's local deadline with
// the monotonic clock at the call, as Lost does.
func (h Hold) Err() error { return h.loss.Err() }

// Context returns a context derived from parent that is cancelled, with the
// loss as its cause (see context.Cause), when the hold is lost. Its Done,
// Err and Value check the lease deadline at the call, as Lost does;
// contexts derived from it are cancelled when the loss fires. Call the
// returned cancel function after Unlock to release its resources.
func (h Hold) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := func() { cancel(context.Canceled) }
	if h.loss == nil {
		return ctx, stop
	}
	go func() {
		select {
		case <-h.loss.Done():
			cancel(h.loss.Err())
		case <-ctx.Done():
		}
	}()
	return &lossCtx{Context: ctx, loss: h.loss, cancel: cancel}, stop
}

// lossCtx is the context of Hold.Context: it cancels itself on the spot
// when it is read after the loss fired (or after the lease deadline), rather
// than when the goroutine that waits for the loss gets to run.
type lossCtx struct {
	context.Context
	loss   *driver.Loss
	cancel context.CancelCauseFunc
}

func (c *lossCtx) check() {
	select {
	case <-c.loss.Done():
		c.cancel(c.loss.Err())
	default:
	}
}

func (c *lossCtx) Done() <-chan struct{} { c.check(); return c.Context.Done() }
func (c *lossCtx) Err() error            { c.check(); return c.Context.Err() }

// Value also checks, so that context.Cause, which finds the cancellation
// through Value, reports the loss.
func (c *lossCtx) Value(key any) any { c.check(); return c.Context.Value(key) }
