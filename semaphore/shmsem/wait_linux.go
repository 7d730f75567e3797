//go:build linux

package shmsem

import (
	"context"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/host/shm"
	"golang.org/x/sys/unix"
)

// Acquire takes n permits, waiting in FIFO order behind the acquisitions
// of every process that queued before it, until ctx is done: then it
// returns an error matching ctx.Err() at once, holds nothing and has
// left the queue.
func (s *Sem) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	if err := s.check(n); err != nil {
		return driver.Grant{}, err
	}
	if s.take(n, false) {
		return s.grant(n), nil
	}
	// The watches end with the call: a watch keeps its Waiter, and with
	// it the handle, reachable.
	defer s.waiter.Close()
	done := ctx.Done()
	if done != nil {
		stop := context.AfterFunc(ctx, s.waiter.Ring)
		defer stop()
	}
	bell := (*uint32)(unsafe.Pointer(s.bell))
	spins := 0
	var since int64 // when this waiter's ticket was served (mono)
	queued := mono()
queue:
	for {
		s.ticket.Store(tTaking)
		t := s.tickets.Add(1 << 32)
		my := uint32(t>>32 - 1)
		if uint32(t) == my {
			s.headAt.Store(mono()) // the head at once
		}
		s.ticket.Store(tHas | uint64(my))
		for {
			w := s.bell.Load()
			if w&1 != 0 {
				// Left set by a waiter of the slot that died asleep.
				s.bell.CompareAndSwap(w, w&^1)
				continue
			}
			serve := uint32(s.tickets.Load())
			if done != nil {
				select {
				case <-done:
					s.leave(my)
					return driver.Grant{}, ctx.Err()
				default:
				}
			}
			switch {
			case serve == my:
				if s.take(n, true) {
					if s.starve.Load() != 0 && mono()-queued <= int64(starveAfter) {
						// This waiter was not kept long, so the queue
						// behind it is short: overtaking may resume. A
						// waiter kept long leaves the queue in order, so
						// that each one behind it is not made to starve
						// afresh (advance ends it when the queue empties).
						s.starve.Store(0)
					}
					s.advance(my)
					s.ticket.Store(0)
					s.kick()
					return s.grant(n), nil
				}
				if s.starve.Load() == 0 {
					// The time as head counts from when the ticket was
					// served, not from when this waiter next ran: a
					// head that the scheduler is slow to wake is not
					// overtaken for that much longer.
					now := mono()
					if since == 0 {
						if since = s.headAt.Load(); since == 0 || since > now {
							since = now
						}
					}
					if now-since > int64(starveAfter) {
						// From now on nobody overtakes this head.
						s.starve.Store(1)
						continue
					}
				}
				if spins < maxSpin {
					// A holder running elsewhere may be about to release:
					// a system call costs more than a short spin.
					if spins++; spins%16 == 0 {
						runtime.Gosched()
					}
					continue
				}
				// The head watches the holders: a holder's exit ends its
				// sleep as a release does.
				if s.watchHolders() {
					continue
				}
			case int32(my-serve) < 0:
				// Skipped while this waiter was slow to record its ticket:
				// the one behind it may be watching it.
				s.ringBehind(my)
				continue queue
			default:
				if s.headGone(serve, false) || s.watchAhead(my, serve) {
					continue
				}
			}
			if !s.bell.CompareAndSwap(w, w|1) {
				continue // rung meanwhile
			}
			err := s.waiter.Sleep(bell, w|1)
			for {
				v := s.bell.Load()
				if v&1 == 0 || s.bell.CompareAndSwap(v, v&^1) {
					break
				}
			}
			if err != nil {
				s.leave(my)
				return driver.Grant{}, err
			}
		}
	}
}

// watchHolders watches, for the head of the queue, the processes that
// have handles on the semaphore, those that hold permits among them; it
// reports whether it found one dead and freed what it held. A handle of a
// process opened since takes permits past the head only after waking it
// (kickHeadOnce), so that it is watched too.
func (s *Sem) watchHolders() bool {
	for i := range int(s.bound.Load()) {
		id, _, _ := s.slotAt(i)
		if v := id.Load(); v != 0 && v != s.me && s.waiter.Watch(int(v&pidMask), uint32(v>>32)) {
			return s.reclaimDead()
		}
	}
	return false
}

// watchAhead watches the process of the nearest waiter ahead of ticket my
// (and of slots taking a ticket, which may be ahead), for a waiter behind
// the head. So the death of any waiter is seen by the live waiter behind
// it: a waiter that leaves rings the one behind it, which then watches
// the next one ahead. It reports whether it dropped a dead waiter's
// ticket, after which the caller looks again.
func (s *Sem) watchAhead(my, serve uint32) bool {
	best, bt := -1, uint32(0)
	for i := range int(s.bound.Load()) {
		id, _, tk := s.slotAt(i)
		t := tk.Load()
		if t == tTaking {
			if v := id.Load(); v != s.me && v != 0 && s.waiter.Watch(int(v&pidMask), uint32(v>>32)) {
				return tk.CompareAndSwap(t, 0)
			}
			continue
		}
		if t&tHas == 0 {
			continue
		}
		n := uint32(t)
		if int32(n-serve) < 0 || int32(my-n) <= 0 {
			continue
		}
		if best < 0 || int32(n-bt) > 0 {
			best, bt = i, n
		}
	}
	if best < 0 {
		return false
	}
	id, _, tk := s.slotAt(best)
	if v := id.Load(); v != 0 && s.waiter.Watch(int(v&pidMask), uint32(v>>32)) {
		return tk.CompareAndSwap(tHas|uint64(bt), 0)
	}
	return false
}

// ringBehind rings the nearest waiter behind ticket my, which watches the
// waiter of my: it looks again for the one ahead of it.
func (s *Sem) ringBehind(my uint32) {
	best, bt := -1, uint32(0)
	for i := range int(s.bound.Load()) {
		_, _, tk := s.slotAt(i)
		t := tk.Load()
		if t&tHas == 0 {
			continue
		}
		if n := uint32(t); int32(n-my) > 0 && (best < 0 || int32(n-bt) < 0) {
			best, bt = i, n
		}
	}
	if best >= 0 {
		ring(s.bellAt(best))
	}
}

// leave takes this handle's ticket my out of the queue: a head passes its
// turn on; a waiter behind it is skipped when its turn comes.
func (s *Sem) leave(my uint32) {
	s.ticket.Store(0)
	s.advance(my)
	s.kick()
	s.ringBehind(my)
}

// advance moves the served ticket from h to h+1, if it is still h.
func (s *Sem) advance(h uint32) bool {
	for {
		t := s.tickets.Load()
		if uint32(t) != h {
			return false
		}
		if s.tickets.CompareAndSwap(t, t&^0xffffffff|uint64(h+1)) {
			if uint32(t>>32) == h+1 {
				// The queue is empty: nobody starves.
				s.starve.Store(0)
			} else {
				s.headAt.Store(mono())
			}
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
		return fmt.Errorf("%w: grant of another driver", baton.ErrInvalidArgument)
	}
	if n <= 0 || n > g.N {
		return fmt.Errorf("release %d of a grant of %d: %w", n, g.N, baton.ErrNotHeld)
	}
	return s.GivePermits(n)
}

// GivePermits gives back n permits of the handle (driver.PermitCounter).
// If the handle's permits were taken back (its slot reclaimed), it returns
// an error matching baton.ErrLost and changes nothing.
func (s *Sem) GivePermits(n int64) error {
	shm.RaceRelease(s.rsync)
	if int64(s.held.Load()&countMask) < n {
		return fmt.Errorf("release %d: %w", n, baton.ErrLost)
	}
	s.held.Add(-uint64(n))
	s.kickIfQueued()
	if s.gone.Load() {
		return s.loss.Err()
	}
	return nil
}

// TakePermits takes n permits if they are free and nobody queues
// (driver.PermitCounter); the core has validated n.
func (s *Sem) TakePermits(n int64) bool {
	if s.closed.Load() || !s.take(n, false) {
		return false
	}
	shm.RaceAcquire(s.rsync)
	return true
}

// PermitLoss returns the Loss of every grant of the handle.
func (s *Sem) PermitLoss() *driver.Loss { return s.loss }

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
	if s.freed.Load() {
		s.r.Release() // else the cleanup releases, once it freed the slot
	}
	return nil
}

// mono returns CLOCK_MONOTONIC in ns, one clock for every process, read
// through the runtime's clock (a system call per read would cost more
// than a grant): the two differ by a constant, taken once.
func mono() int64 { return monoBase + int64(time.Since(monoEpoch)) }

var (
	monoEpoch = time.Now()
	monoBase  = func() int64 {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return ts.Nano() - int64(time.Since(monoEpoch))
	}()
)
