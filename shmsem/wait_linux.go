//go:build linux

package shmsem

import (
	"context"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// Acquire takes n permits, waiting in FIFO order behind the acquisitions
// of every process that queued before it, until ctx is done: then it
// returns an error matching ctx.Err() within about a millisecond, holds
// nothing and has left the queue.
func (s *Sem) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	if err := s.check(n); err != nil {
		return driver.Grant{}, err
	}
	if s.take(n, false) {
		return s.grant(n), nil
	}
	done := ctx.Done()
	if done != nil {
		stop := context.AfterFunc(ctx, s.kick)
		defer stop()
	}
	ww := (*uint32)(unsafe.Pointer(s.wake))
queue:
	for {
		s.ticket.Store(tTaking)
		my := uint32(s.tickets.Add(1<<32)>>32 - 1)
		s.ticket.Store(tHas | uint64(my))
		for {
			w := s.wake.Load()
			serve := uint32(s.tickets.Load())
			if done != nil {
				select {
				case <-done:
					s.leave(my)
					return driver.Grant{}, s.errf("%w", ctx.Err())
				default:
				}
			}
			switch {
			case serve == my:
				if s.take(n, true) {
					s.advance(my)
					s.ticket.Store(0)
					s.kick()
					return s.grant(n), nil
				}
			case int32(my-serve) < 0:
				// Skipped while this waiter was slow to record its ticket.
				continue queue
			default:
				if s.headGone(serve, false) {
					continue
				}
			}
			timedOut, err := ipc.FutexWait(ww, w, deadCheck)
			if err != nil {
				s.leave(my)
				return driver.Grant{}, s.errf("%w", err)
			}
			if timedOut && s.wake.Load() == w {
				if serve == my {
					s.reclaimDead()
				} else {
					s.headGone(serve, true)
				}
			}
		}
	}
}

// leave takes this handle's ticket my out of the queue: a head passes its
// turn on; a waiter behind it is skipped when its turn comes.
func (s *Sem) leave(my uint32) {
	s.ticket.Store(0)
	s.advance(my)
	s.kick()
}

// advance moves the served ticket from h to h+1, if it is still h.
func (s *Sem) advance(h uint32) bool {
	for {
		t := s.tickets.Load()
		if uint32(t) != h {
			return false
		}
		if s.tickets.CompareAndSwap(t, t&^0xffffffff|uint64(h+1)) {
			return true
		}
	}
}

// headGone skips the served ticket h when no slot claims it (and no slot is
// taking a ticket, which might be h): its waiter gave up or, when
// deathCheck, died. It reports whether the queue moved.
func (s *Sem) headGone(h uint32, deathCheck bool) bool {
	for i := range int(s.bound.Load()) {
		id, _, tk := s.slotAt(i)
		t := tk.Load()
		if t != tHas|uint64(h) && t != tTaking {
			continue
		}
		if deathCheck && s.dead(id.Load()) {
			tk.CompareAndSwap(t, 0)
			continue
		}
		return false
	}
	if s.advance(h) {
		s.kick()
	}
	return true
}

// Release gives back n permits of grant g (0 < n <= g.N). If the handle's
// permits were taken back (its slot reclaimed), it returns an error
// matching baton.ErrLost and changes nothing.
func (s *Sem) Release(ctx context.Context, g driver.Grant, n int64) error {
	if g.Data != s {
		return s.errf("%w: grant of another driver", baton.ErrInvalidArgument)
	}
	if n <= 0 || n > g.N {
		return s.errf("release %d of a grant of %d: %w", n, g.N, baton.ErrNotHeld)
	}
	raceRelease(s.rsync)
	if int64(s.held.Load()&countMask) < n {
		return s.errf("release %d: %w", n, baton.ErrLost)
	}
	s.held.Add(-uint64(n))
	s.kickIfQueued()
	if s.gone.Load() {
		return s.errf("%w", s.loss.Err())
	}
	return nil
}

// Available returns the number of permits not held now.
func (s *Sem) Available() int64 { return s.capacity - s.sum() }

// Close frees the handle's slot and stops its watcher; Acquire and
// TryAcquire fail after it. The core gives back the permits first; a slot
// that still holds some is freed, and its permits given back, when the
// handle is unreachable.
func (s *Sem) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stopWatch != nil {
		s.stopWatch()
	}
	if s.held.Load()&countMask == 0 && !s.freed.Swap(true) {
		free(s.ident, s.held, s.ticket, s.me)
	}
	return nil
}
