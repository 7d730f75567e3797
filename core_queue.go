package baton

import (
	"context"
	"errors"
	"sync"

	"github.com/batonlock/baton/driver"
)

// The queueing that lock and semaphore handles share: a FIFO of waiting
// goroutines, a wait for the handle's driver calls to end, and the call of
// a driver's acquisition that Close can cancel.

// waiter is a goroutine queued on a handle or on a pass line.
type waiter struct {
	mode  Mode
	owner Owner
	ch    chan struct{} // buffered(1): a nudge to re-check the state
	// For a waiter of a pass line (core_pass.go), set under the line's
	// mutex when the waiter leaves the line's queue:
	h       *lockHandle // the waiter's handle
	granted bool        // handed the hold: h holds it for owner
	turn    bool        // handed the turn to acquire from the driver
}

func newWaiter(mode Mode, owner Owner, h *lockHandle) *waiter {
	return &waiter{mode: mode, owner: owner, ch: make(chan struct{}, 1), h: h}
}

// nudge wakes w to look at its state.
func (w *waiter) nudge() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// queue is a FIFO of waiters, guarded by the mutex of its handle or line.
type queue []*waiter

// kick nudges the head of the queue to re-check the state.
func (q queue) kick() {
	if len(q) > 0 {
		q[0].nudge()
	}
}

// wakeAll nudges every waiter (for Close, after which each sees the handle
// closed).
func (q queue) wakeAll() {
	for _, w := range q {
		w.nudge()
	}
}

// pop takes the head of the queue off it.
func (q *queue) pop() *waiter {
	w := (*q)[0]
	(*q)[0] = nil
	*q = (*q)[1:]
	return w
}

// remove takes w off the queue and reports whether it was the head.
func (q *queue) remove(w *waiter) (head bool) {
	for i, x := range *q {
		if x == w {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return i == 0
		}
	}
	return false
}

// leave takes w off the queue; if it was the head, the next one looks.
func (q *queue) leave(w *waiter) {
	if q.remove(w) {
		q.kick()
	}
}

// idle lets goroutines wait, under a handle's mutex, until the handle's
// driver calls have ended. Its channel is made only when someone waits.
type idle struct{ ch chan struct{} }

// wait waits for the next broadcast; mu is held, and released meanwhile.
func (i *idle) wait(mu *sync.Mutex) {
	if i.ch == nil {
		i.ch = make(chan struct{})
	}
	ch := i.ch
	mu.Unlock()
	<-ch
	mu.Lock()
}

func (i *idle) broadcast() {
	if i.ch != nil {
		close(i.ch)
		i.ch = nil
	}
}

// handleQueue is the state that lock and semaphore handles share, guarded
// by the handle's mutex.
type handleQueue struct {
	closed    bool
	q         queue
	idle      idle
	cancelAcq context.CancelFunc // cancels the Acquire in progress, for Close
}

// closeQueue marks the handle closed, cancels the acquisition in progress
// and wakes every waiter.
func (c *handleQueue) closeQueue() {
	c.closed = true
	if c.cancelAcq != nil {
		c.cancelAcq()
	}
	c.q.wakeAll()
}

// callDriver runs a driver's acquisition. It is entered with mu held and
// returns with mu released. A driver whose TryAcquire is cheap (cheap) is
// tried first, so that an uncontended acquisition does not pay for a
// cancellable wait; try asks for TryAcquire only. The wait is cancelled by
// Close through cancelAcq.
func (c *handleQueue) callDriver(mu *sync.Mutex, ctx context.Context, try, cheap bool,
	tryAcquire, acquire func(context.Context) (driver.Grant, error)) (driver.Grant, error) {
	if try || cheap {
		mu.Unlock()
		g, err := tryAcquire(ctx)
		if try || !errors.Is(err, ErrLocked) {
			return g, err
		}
		mu.Lock()
		if c.closed {
			mu.Unlock()
			return driver.Grant{}, ErrClosed
		}
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.cancelAcq = cancel
	mu.Unlock()
	return acquire(actx)
}

// cheap reports whether d tries first (driver.TryFirst).
func cheap(d any) bool {
	tf, ok := d.(driver.TryFirst)
	return ok && tf.TryFirst()
}
