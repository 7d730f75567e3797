package baton

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/driver"
)

// The observed paths of the core's handles: taken when an Observer is
// attached to the Backend (observe.go), so that the unobserved paths keep
// one atomic load for it.

func (h *lockHandle) kind() Kind {
	if h.r != nil {
		return KindRWMutex
	}
	return KindMutex
}

// lockObserved is lockOp with the acquisition reported to o: the word path
// first, as Lock takes it, then the regular one.
func (h *lockHandle) lockObserved(o Observer, op string, ctx context.Context, mode Mode, try bool) (Hold, error) {
	kind := h.kind()
	h.b.emit(o, Event{Type: EventAcquire, Kind: kind, Name: h.name, Op: op, Mode: mode})
	t0 := monoNow()
	hd, ok := Hold{}, false
	if mode == Exclusive && h.word != nil {
		hd, ok = h.lockWord(ctx)
	}
	var err error
	if !ok {
		if hd, err = h.lock(ctx, mode, try); err != nil {
			err = h.fail(op, err)
		}
	}
	now := monoNow()
	wait := time.Duration(now - t0)
	if err != nil {
		h.b.emit(o, Event{Type: EventFailed, Kind: kind, Name: h.name, Op: op, Mode: mode, Wait: wait, Err: err})
		return Hold{}, err
	}
	if mode == Exclusive {
		h.times().w.CompareAndSwap(0, now)
	} else {
		h.times().r.CompareAndSwap(0, now)
	}
	h.b.emit(o, Event{Type: EventAcquired, Kind: kind, Name: h.name, Op: op, Mode: mode, Wait: wait, Token: hd.Token()})
	hd.loss.Watch(h.watcher(hd.Mode()))
	return hd, nil
}

// unlockObserved is Unlock with the release reported to o.
func (h *lockHandle) unlockObserved(o Observer, ctx context.Context) error {
	var t0 int64
	var loss *driver.Loss
	if ctx != nil {
		if n, l := h.writeHold(ctx); n == 1 {
			// This Unlock gives up the write hold: take its start before
			// another goroutine can take the lock and record its own.
			t0, loss = h.times().w.Swap(0), l
		}
	}
	err := h.fail("unlock", h.unlock(ctx))
	h.released(o, "unlock", Exclusive, t0, err, h.unwatch(loss))
	return err
}

// runlockObserved is RUnlock with the release reported to o.
func (h *lockHandle) runlockObserved(o Observer, ctx context.Context) error {
	var loss *driver.Loss
	h.mu().Lock()
	if h.held && !h.writer {
		loss = h.grant.Loss
	}
	h.mu().Unlock()
	err := h.fail("runlock", h.runlock(ctx))
	var t0 int64
	if err == nil {
		h.mu().Lock()
		last := h.r.readers == 0
		h.mu().Unlock()
		if t0 = h.times().r.Load(); last {
			h.times().r.CompareAndSwap(t0, 0)
		}
	}
	h.released(o, "runlock", Shared, t0, err, h.unwatch(loss))
	return err
}

// writeHold returns the count of the write holds of the owner in ctx and
// the Loss of the grant.
func (h *lockHandle) writeHold(ctx context.Context) (int, *driver.Loss) {
	owner := OwnerOf(ctx)
	if h.wordHeldBy(owner) {
		return 1, h.wordLoss
	}
	h.mu().Lock()
	defer h.mu().Unlock()
	if h.writer && h.wOwner == owner {
		return h.wCount, h.grant.Loss
	}
	return 0, nil
}

// A Loss that fires while a hold taken on an observed path carries it is
// reported at once (EventLost, Op "hold"), and its release does not report
// it again. The watchers are the handle itself under other types, so that
// watching costs no memory.
type (
	writeWatch lockHandle
	readWatch  lockHandle
	semWatch   semHandle
)

func (w *writeWatch) LossFired(err error) { (*lockHandle)(w).lossFired(Exclusive, err) }
func (w *readWatch) LossFired(err error)  { (*lockHandle)(w).lossFired(Shared, err) }

func (w *semWatch) LossFired(err error) {
	s := (*semHandle)(w)
	if o := s.b.observer(); o != nil {
		s.b.emit(o, Event{Type: EventLost, Kind: KindSemaphore, Name: s.name, Op: "hold", Mode: Shared, Err: err})
	}
}

func (h *lockHandle) lossFired(mode Mode, err error) {
	if o := h.b.observer(); o != nil {
		h.b.emit(o, Event{Type: EventLost, Kind: h.kind(), Name: h.name, Op: "hold", Mode: mode, Err: err})
	}
}

// watcher returns the watcher of the handle's holds in mode.
func (h *lockHandle) watcher(mode Mode) driver.LossWatcher {
	if mode == Exclusive {
		return (*writeWatch)(h)
	}
	return (*readWatch)(h)
}

// unwatch takes the handle's watcher off loss, the Loss of a hold just
// given back, unless a hold of the handle still carries it (a Loss of the
// handle rather than of one grant), and reports whether the loss was
// reported when it fired.
func (h *lockHandle) unwatch(loss *driver.Loss) bool {
	if loss == nil {
		return false
	}
	h.mu().Lock()
	defer h.mu().Unlock()
	if h.held && h.grant.Loss == loss || h.word != nil && loss == h.wordLoss && h.word.HeldOnWord() {
		return loss.Told()
	}
	return loss.Unwatch()
}

// holdTimes are the starts (monoNow; 0: unknown) of a handle's write hold
// and of its first current read hold.
type holdTimes struct{ w, r atomic.Int64 }

// times returns the handle's holdTimes, made on first use: handles that no
// observer watches keep none.
func (h *lockHandle) times() *holdTimes {
	if t := h.since.Load(); t != nil {
		return t
	}
	h.since.CompareAndSwap(nil, new(holdTimes))
	return h.since.Load()
}

// released reports the outcome of a release: EventReleased, or EventLost
// for a hold found lost unless its loss was reported when it fired (told);
// other failures were reported as EventError.
func (h *lockHandle) released(o Observer, op string, mode Mode, t0 int64, err error, told bool) {
	switch {
	case err == nil:
		e := Event{Type: EventReleased, Kind: h.kind(), Name: h.name, Op: op, Mode: mode}
		if t0 != 0 {
			e.Held = since(t0)
		}
		h.b.emit(o, e)
	case errors.Is(err, ErrLost) && !told:
		h.b.emit(o, Event{Type: EventLost, Kind: h.kind(), Name: h.name, Op: op, Mode: mode, Err: err})
	}
}

// downgraded moves the start of the write hold, and the watch of its Loss,
// to the read holds.
func (h *lockHandle) downgraded(hd Hold) {
	if t0 := h.times().w.Swap(0); t0 != 0 {
		h.times().r.CompareAndSwap(0, t0)
	}
	hd.loss.Watch(h.watcher(Shared))
}

// passed reports a hold handed to another handle of the line.
func (h *lockHandle) passed(o Observer) {
	h.b.emit(o, Event{Type: EventPassed, Kind: KindMutex, Name: h.name, Op: "unlock", Mode: Exclusive})
}

// acquireObserved is Acquire or TryAcquire with the acquisition reported
// to o.
func (s *semHandle) acquireObserved(o Observer, op string, ctx context.Context, n int64, try bool) (Hold, error) {
	s.b.emit(o, Event{Type: EventAcquire, Kind: KindSemaphore, Name: s.name, Op: op, Mode: Shared, N: n})
	t0 := monoNow()
	hd, ok := Hold{}, false
	if s.pool != nil {
		hd, ok = s.takePermits(ctx, n)
	}
	var err error
	if !ok {
		if hd, err = s.acquire(ctx, n, try); err != nil {
			err = s.fail(op, err)
		}
	}
	e := Event{Type: EventAcquired, Kind: KindSemaphore, Name: s.name, Op: op, Mode: Shared, N: n, Wait: since(t0), Token: hd.Token()}
	if err != nil {
		e.Type, e.Err, e.Token = EventFailed, err, 0
	}
	s.b.emit(o, e)
	hd.loss.Watch((*semWatch)(s))
	return hd, err
}

// releaseObserved is Release with the release reported to o.
func (s *semHandle) releaseObserved(o Observer, ctx context.Context, n int64) error {
	var buf [2]*driver.Loss // the usual case: one grant, no allocation
	losses := s.releasedLosses(n, buf[:0])
	var err error
	done := false
	if s.pool != nil && ctx != nil && n > 0 {
		done, err = s.givePermits(n)
	}
	if !done {
		err = s.release(ctx, n)
	}
	err = s.fail("release", err)
	told := s.unwatch(losses)
	switch {
	case err == nil:
		s.b.emit(o, Event{Type: EventReleased, Kind: KindSemaphore, Name: s.name, Op: "release", Mode: Shared, N: n})
	case errors.Is(err, ErrLost) && !told:
		s.b.emit(o, Event{Type: EventLost, Kind: KindSemaphore, Name: s.name, Op: "release", Mode: Shared, N: n, Err: err})
	}
	return err
}

// releasedLosses appends to buf the Losses of the grants that a Release of
// n gives back (in part or whole, newest first, as release takes them) and
// the permit path's.
func (s *semHandle) releasedLosses(n int64, buf []*driver.Loss) []*driver.Loss {
	if s.poolLoss != nil {
		buf = append(buf, s.poolLoss)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.grants) - 1; i >= 0 && n > 0; i-- {
		if l := s.grants[i].Loss; l != nil {
			buf = append(buf, l)
		}
		n -= s.grants[i].N
	}
	return buf
}

// unwatch takes the handle's watcher off those of losses that no grant of
// the handle carries any more (the permit path's Loss stays watched), and
// reports whether any of them was reported when it fired.
func (s *semHandle) unwatch(losses []*driver.Loss) bool {
	if len(losses) == 0 {
		return false
	}
	told := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range losses {
		if l == s.poolLoss || s.carries(l) {
			told = l.Told() || told
		} else {
			told = l.Unwatch() || told
		}
	}
	return told
}

// carries reports whether a grant the handle holds has Loss l. s.mu is
// held.
func (s *semHandle) carries(l *driver.Loss) bool {
	for _, g := range s.grants {
		if g.Loss == l {
			return true
		}
	}
	return false
}
