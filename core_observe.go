package baton

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
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
	return hd, nil
}

// unlockObserved is Unlock with the release reported to o.
func (h *lockHandle) unlockObserved(o Observer, ctx context.Context) error {
	var t0 int64
	if ctx != nil && h.holdCount(ctx) == 1 {
		// This Unlock gives up the write hold: take its start before
		// another goroutine can take the lock and record its own.
		t0 = h.times().w.Swap(0)
	}
	err := h.fail("unlock", h.unlock(ctx))
	h.released(o, "unlock", Exclusive, t0, err)
	return err
}

// runlockObserved is RUnlock with the release reported to o.
func (h *lockHandle) runlockObserved(o Observer, ctx context.Context) error {
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
	h.released(o, "runlock", Shared, t0, err)
	return err
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
// for a hold found lost (other failures were reported as EventError).
func (h *lockHandle) released(o Observer, op string, mode Mode, t0 int64, err error) {
	switch {
	case err == nil:
		e := Event{Type: EventReleased, Kind: h.kind(), Name: h.name, Op: op, Mode: mode}
		if t0 != 0 {
			e.Held = since(t0)
		}
		h.b.emit(o, e)
	case errors.Is(err, ErrLost):
		h.b.emit(o, Event{Type: EventLost, Kind: h.kind(), Name: h.name, Op: op, Mode: mode, Err: err})
	}
}

// downgraded moves the start of the write hold to the read holds.
func (h *lockHandle) downgraded() {
	if t0 := h.times().w.Swap(0); t0 != 0 {
		h.times().r.CompareAndSwap(0, t0)
	}
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
	return hd, err
}

// releaseObserved is Release with the release reported to o.
func (s *semHandle) releaseObserved(o Observer, ctx context.Context, n int64) error {
	var err error
	done := false
	if s.pool != nil && ctx != nil && n > 0 {
		done, err = s.givePermits(n)
	}
	if !done {
		err = s.release(ctx, n)
	}
	err = s.fail("release", err)
	switch {
	case err == nil:
		s.b.emit(o, Event{Type: EventReleased, Kind: KindSemaphore, Name: s.name, Op: "release", Mode: Shared, N: n})
	case errors.Is(err, ErrLost):
		s.b.emit(o, Event{Type: EventLost, Kind: KindSemaphore, Name: s.name, Op: "release", Mode: Shared, N: n, Err: err})
	}
	return err
}
