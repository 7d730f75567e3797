package baton

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/driver"
)

// Job is one claim of a job of a Queue. The claim is a lease, kept by the
// backend while the job is held (renewed in the background where the
// backend has leases): Lost, Err and Context report its loss exactly as
// those of a Hold do, and a lost claim may already be given to another
// claimant. Pass Token to the resource the job writes, through a fence,
// so that a stale claimant's writes are refused.
//
// The claim ends with one of Ack (done), Retry (again later) or Fail (this
// attempt failed); a second one returns ErrNotHeld. A job is claimed at
// most MaxAttempts times: Retry or Fail of its last attempt makes it a dead
// letter. A Job is safe for concurrent use.
type Job struct {
	q *jobQueue
	c driver.Claim
	// state: 0 claimed, 1 an Ack, Retry or Fail in progress, 2 ended,
	// 3 found lost.
	state atomic.Uint32
	at    int64 // monoNow at the claim, when observed
}

// ID returns the job's id.
func (j *Job) ID() JobID { return JobID(j.c.ID) }

// Payload returns the job's payload (the caller's own).
func (j *Job) Payload() []byte { return j.c.Payload }

// Attempt returns which claim of the job this is: 1 for the first.
func (j *Job) Attempt() int { return j.c.Attempt }

// MaxAttempts returns how many times the job may be claimed.
func (j *Job) MaxAttempts() int { return j.c.MaxAttempts }

// Token returns the claim's fencing token, greater than every token the
// queue gave before.
func (j *Job) Token() Token { return Token(j.c.Token) }

// Hold returns the claim as a Hold (exclusive), for code written for
// locks.
func (j *Job) Hold() Hold { return newHold(Token(j.c.Token), Exclusive, false, j.c.Loss) }

// Lost returns a channel closed when the claim is lost (see Hold.Lost).
func (j *Job) Lost() <-chan struct{} { return j.c.Loss.Done() }

// Err returns nil while the claim is trusted and an error matching ErrLost
// once it is lost (see Hold.Err).
func (j *Job) Err() error { return j.c.Loss.Err() }

// Context returns a context derived from parent that is cancelled, with
// the loss as its cause, when the claim is lost (see Hold.Context).
func (j *Job) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return j.Hold().Context(parent)
}

// Ack ends the claim: the job is done and leaves the queue.
func (j *Job) Ack(ctx context.Context) error {
	return j.end(ctx, "ack", func(d driver.Queue) error { return d.Ack(ctx, j.c) })
}

// Retry ends the claim and makes the job ready again after the delay
// (>= 0), or a dead letter if this was its last attempt.
func (j *Job) Retry(ctx context.Context, after time.Duration) error {
	if after < 0 || time.Now().Add(after).After(maxReadyAt) {
		return j.q.fail("retry", fmt.Errorf("%w: delay %v, must be >= 0 and end by %v", ErrInvalidArgument, after, maxReadyAt))
	}
	return j.end(ctx, "retry", func(d driver.Queue) error {
		var at time.Time
		if after > 0 {
			at = time.Now().Add(after)
		}
		return d.Retry(ctx, j.c, at, "retried on its last attempt")
	})
}

// Fail ends the claim as a failed attempt: the job is ready again at once,
// or, if this was its last attempt, a dead letter that keeps reason (cut
// to MaxReasonLen bytes).
func (j *Job) Fail(ctx context.Context, reason string) error {
	reason = cutReason(reason)
	return j.end(ctx, "fail", func(d driver.Queue) error { return d.Retry(ctx, j.c, time.Time{}, reason) })
}

// end runs the driver's end of the claim, once.
func (j *Job) end(ctx context.Context, op string, do func(driver.Queue) error) error {
	if ctx == nil {
		return j.q.fail(op, errNilContext)
	}
	if err := ctx.Err(); err != nil {
		return j.q.fail(op, err)
	}
	lost := func(err error) error {
		j.state.Store(3)
		return j.q.fail(op, err)
	}
	if err := j.c.Loss.Err(); err != nil {
		return j.q.fail(op, err)
	}
	if !j.state.CompareAndSwap(0, 1) {
		if j.state.Load() == 3 {
			return j.q.fail(op, fmt.Errorf("%w: job %d, token %d", ErrLost, j.c.ID, j.c.Token))
		}
		return j.q.fail(op, fmt.Errorf("%w: job %d was acked, retried or failed already", ErrNotHeld, j.c.ID))
	}
	q := j.q
	q.mu.RLock()
	if q.closed.Load() {
		// Close gave the job back: its loss has fired.
		q.mu.RUnlock()
		return lost(fmt.Errorf("%w: the queue handle was closed", ErrLost))
	}
	err := do(q.d)
	q.mu.RUnlock()
	switch {
	case err == nil:
		j.state.Store(2)
		if o := q.b.observer(); o != nil && j.at != 0 {
			e := Event{Type: EventReleased, Kind: KindQueue, Name: q.name, Op: op, Held: since(j.at), Token: j.Token()}
			if op != "ack" && j.c.Attempt >= j.c.MaxAttempts {
				e.N = 1 // the job became a dead letter
			}
			q.b.emit(o, e)
		}
		return nil
	case isAny(err, ErrLost):
		return lost(err)
	case isAny(err, ErrNotHeld):
		// An earlier end whose outcome was unknown took effect.
		j.state.Store(2)
		return q.fail(op, err)
	}
	// The outcome is unknown (a network error): the claim may be ended
	// again.
	j.state.Store(0)
	return q.fail(op, err)
}
