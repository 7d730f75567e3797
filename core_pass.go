package baton

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/batonlock/baton/driver"
)

// Handles of one Backend pass a Mutex among themselves when the driver is a
// driver.Passer: the server knows the Backend as the holder, so a hold can
// change hands inside the process with no round trip.
//
// Every handle of the name shares one pass line: one FIFO of the goroutines
// of all of them, and one turn. Whoever has the turn is the only one that
// talks to the driver for a grant (it waits on the server, in the server's
// queue, while the others wait in the line), then holds the grant, then
// gives it up: to the head of the line with Pass, or back to the driver with
// Release, after which the head of the line gets the turn and asks the
// driver in its turn. A hold is passed only for passFor after it came from
// the driver; then it goes back to the server, so that other clients of the
// server wait at most one round of the line more.
//
// The line's mutex is the mutex of every handle on it (lockHandle.mu), so a
// passed hold is written into the receiving handle at once, by the giver:
// it is never in flight between two handles, and Close or a cancellation of
// the receiver finds it where any hold of the handle is.

// passFor is how long a hold may go round the handles of one Backend after
// it came from the driver's Acquire or TryAcquire. A variable only so that
// tests of what a pass reports can widen it on a loaded machine.
var passFor = 5 * time.Millisecond

// passEpoch is the origin of monoNow.
var passEpoch = time.Now()

// monoNow returns the monotonic clock in ns since passEpoch: an int64
// takes a third of a time.Time's room in every pass line.
func monoNow() int64 { return int64(time.Since(passEpoch)) }

// passLine is a Backend's state for one Mutex name whose driver is a
// driver.Passer.
type passLine struct {
	mu    sync.Mutex
	refs  int   // open handles on the line; guarded by coreBackend.mu
	busy  bool  // the turn is taken (guarded by mu, as all below)
	since int64 // when the grant in force came from the driver (monoNow)
	q     queue // goroutines of every handle, FIFO
}

// giveTurn passes the turn to the head of the line, or frees it.
func (l *passLine) giveTurn() {
	if l.q.empty() {
		l.busy = false
		return
	}
	w := l.q.pop()
	w.turn = true
	w.nudge()
}

// leave takes the waiters of h, which is closing, out of the line and wakes
// them, so that nothing can be handed to them any more.
func (l *passLine) leave(h *lockHandle) {
	l.q.removeIf(func(w *waiter) bool {
		if w.h != h {
			return false
		}
		w.nudge()
		return true
	})
}

// lockLine is lock for a handle on a pass line: entered with h.mu held
// after the checks that need no turn (closed, reentrancy, ctx), returns
// with h.mu released. TryLock never waits for the turn.
func (h *lockHandle) lockLine(ctx context.Context, owner Owner, try bool) (Hold, error) {
	l := h.line
	if !l.busy && l.q.empty() {
		l.busy = true
		return h.acquireLine(ctx, owner, try)
	}
	if try {
		h.mu().Unlock()
		return Hold{}, ErrLocked
	}
	w := newWaiter(Exclusive, owner, h)
	l.q.push(w)
	for {
		h.mu().Unlock()
		select {
		case <-w.ch:
		case <-ctx.Done():
		}
		h.mu().Lock()
		switch {
		case h.closed:
			// Close took w out of the line; a hold handed to w before is
			// the handle's, and Close gives it back.
			if w.turn {
				l.giveTurn()
			}
			h.mu().Unlock()
			return Hold{}, ErrClosed
		case w.granted:
			if err := ctx.Err(); err != nil {
				// Handed the hold as the context ended: the context
				// wins, and the hold goes on down the line.
				return Hold{}, h.giveBack(ctx, err)
			}
			h.mu().Unlock()
			return w.got, nil
		case w.turn:
			if err := ctx.Err(); err != nil {
				l.giveTurn()
				h.mu().Unlock()
				return Hold{}, err
			}
			return h.acquireLine(ctx, owner, false)
		case ctx.Err() != nil:
			l.q.remove(w)
			h.mu().Unlock()
			return Hold{}, ctx.Err()
		}
	}
}

// giveBack undoes the hold just handed to a goroutine whose context ended
// (or whose handle closed) before it could return it, as one Unlock would,
// and returns the error for that goroutine. Entered with h.mu held, returns
// with it released.
func (h *lockHandle) giveBack(ctx context.Context, cause error) error {
	if !h.writer {
		// Another goroutine unlocked the anonymous hold meanwhile.
		h.mu().Unlock()
		return cause
	}
	if h.wCount--; h.wCount > 0 {
		h.mu().Unlock()
		return cause
	}
	h.wOwner = 0
	if rerr := h.releaseGrant(ctx); rerr != nil {
		return fmt.Errorf("%w (releasing: %v)", cause, rerr)
	}
	return cause
}

// acquireLine asks the driver for a grant, with the turn. Entered with h.mu
// held, returns with it released.
func (h *lockHandle) acquireLine(ctx context.Context, owner Owner, try bool) (Hold, error) {
	h.acquiring = true
	g, err := h.callDriver(ctx, Exclusive, try)
	h.mu().Lock()
	h.cancelAcq = nil
	h.acquiring = false
	h.idle.broadcast()
	if err != nil {
		h.line.giveTurn()
		return Hold{}, h.failed(h.mu(), err)
	}
	h.line.since = monoNow()
	h.held, h.grant, h.writer, h.wOwner, h.wCount = true, g, true, owner, 1
	if h.closed {
		return Hold{}, h.giveBack(ctx, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return Hold{}, h.giveBack(ctx, err)
	}
	hd := h.hold()
	h.mu().Unlock()
	return hd, nil
}

// passOn gives up g, the grant of the line that h held (its local holds
// already cleared): to the head of the line while the hold is young enough
// and the driver can pass it, or else back to the driver, and then the turn
// to the head of the line. Entered with h.mu held, returns with it released.
func (h *lockHandle) passOn(ctx context.Context, g driver.Grant) error {
	l := h.line
	if !l.q.empty() && monoNow()-l.since < int64(passFor) {
		if ng, ok := h.d.(driver.Passer).Pass(g); ok {
			w := l.q.pop()
			r := w.h
			r.held, r.grant, r.writer, r.wOwner, r.wCount = true, ng, true, w.owner, 1
			w.granted, w.got = true, r.hold()
			w.nudge()
			h.mu().Unlock()
			if o := h.b.observer(); o != nil {
				h.passed(o)
			}
			return nil
		}
	}
	h.busy = true
	h.mu().Unlock()
	err := h.d.Release(context.WithoutCancel(ctx), g)
	h.mu().Lock()
	h.busy = false
	h.idle.broadcast()
	l.giveTurn()
	h.mu().Unlock()
	return err
}
