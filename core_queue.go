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
	got     Hold        // the hold handed over, when granted

	next, prev *waiter // in the queue (nil: in none); guarded as the queue
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

// queue is a FIFO of waiters, guarded by the mutex of its handle or line:
// a ring linked through the waiters themselves, so that an idle handle
// keeps one word for it. A waiter is in at most one queue.
type queue struct{ head *waiter }

func (q *queue) empty() bool { return q.head == nil }

// push puts w at the tail.
func (q *queue) push(w *waiter) {
	if q.head == nil {
		w.next, w.prev = w, w
		q.head = w
		return
	}
	t := q.head.prev
	w.prev, w.next = t, q.head
	t.next = w
	q.head.prev = w
}

// unlink takes w, which is in q, off it.
func (q *queue) unlink(w *waiter) {
	if w.next == w {
		q.head = nil
	} else {
		w.prev.next, w.next.prev = w.next, w.prev
		if q.head == w {
			q.head = w.next
		}
	}
	w.next, w.prev = nil, nil
}

// kick nudges the head of the queue to re-check the state.
func (q *queue) kick() {
	if q.head != nil {
		q.head.nudge()
	}
}

// wakeAll nudges every waiter (for Close, after which each sees the handle
// closed).
func (q *queue) wakeAll() {
	for w := q.head; w != nil; {
		w.nudge()
		if w = w.next; w == q.head {
			return
		}
	}
}

// pop takes the head of the queue off it.
func (q *queue) pop() *waiter {
	w := q.head
	q.unlink(w)
	return w
}

// remove takes w off the queue, if it is in it, and reports whether it
// was the head.
func (q *queue) remove(w *waiter) (head bool) {
	if w.next == nil {
		return false
	}
	head = q.head == w
	q.unlink(w)
	return head
}

// len counts the waiters.
func (q *queue) len() int {
	if q.head == nil {
		return 0
	}
	n := 1
	for w := q.head.next; w != q.head; w = w.next {
		n++
	}
	return n
}

// removeIf takes off the queue, in order, every waiter for which f is true.
func (q *queue) removeIf(f func(*waiter) bool) {
	if q.head == nil {
		return
	}
	n := q.len()
	for w := q.head; n > 0; n-- {
		next := w.next
		if f(w) {
			q.unlink(w)
		}
		w = next
	}
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
	busy      bool // a driver call that Close must wait for is in progress
	q         queue
	idle      idle
	cancelAcq context.CancelFunc // cancels the Acquire in progress, for Close
}

// failed returns the error of a call that failed, releasing mu: ErrClosed
// when the handle was closed meanwhile, which is what the caller must
// hear whatever else went wrong, and else err.
func (c *handleQueue) failed(mu *sync.Mutex, err error) error {
	closed := c.closed
	mu.Unlock()
	if closed {
		return ErrClosed
	}
	return err
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
	if ctx.Done() == nil {
		return acquire(driver.WithCloseOnly(actx))
	}
	return acquire(actx)
}

// cheap reports whether d tries first (driver.TryFirst).
func cheap(d any) bool {
	tf, ok := d.(driver.TryFirst)
	return ok && tf.TryFirst()
}
