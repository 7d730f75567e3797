package baton

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
// The zero Loss is not usable; use NewLoss. A nil *Loss never fires.
type Loss struct {
	once     sync.Once
	ch       chan struct{}
	deadline atomic.Int64 // monotonic ns since monoEpoch; 0: none
	mu       sync.Mutex
	err      error // guarded by mu; set once, before ch is closed
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
func NewLoss() *Loss { return &Loss{ch: make(chan struct{})} }

// Fire marks the hold lost with cause (which is wrapped so that
// errors.Is(err, ErrLost) holds). Only the first call has an effect.
func (l *Loss) Fire(cause error) {
	if l == nil {
		return
	}
	l.once.Do(func() {
		var err error
		switch {
		case cause == nil:
			err = ErrLost
		default:
			err = fmt.Errorf("%w: %w", ErrLost, cause)
		}
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.ch)
	})
}

// Done returns a channel that is closed when the hold is lost; it is
// already closed if the deadline has passed. It returns nil (a channel that
// never becomes ready) for a nil Loss.
func (l *Loss) Done() <-chan struct{} {
	if l == nil {
		return nil
	}
	l.check()
	return l.ch
}

// Err returns nil until the Loss fires (or its deadline passes), and then an
// error matching ErrLost that wraps the cause.
func (l *Loss) Err() error {
	if l == nil {
		return nil
	}
	l.check()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
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
	loss      *Loss
}

// NewHold is for drivers and the core; applications receive Holds from Lock.
func NewHold(token Token, mode Mode, recovered bool, loss *Loss) Hold {
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
	loss   *Loss
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
