package baton

import (
	"context"
	"errors"
	"unsafe"

	"github.com/batonlock/baton/driver"
)

// The word path of the futex mutex (driver.WordLocker), and the Mutex and
// RWMutex methods, which wrap the causes of the handle's failures in one
// *Error.

// The interface tables of context.Background() and context.TODO() as
// Contexts: a context of either type has no values and is never done, so
// the word path can skip asking it (two dynamic calls, a fifth of an
// uncontended Lock+Unlock). The runtime keeps one table per pair of
// interface and dynamic type, so comparing the first word of the
// interface value is a type check, one load cheaper than reflect.TypeOf.
var (
	backgroundTab = ctxTab(context.Background())
	todoTab       = ctxTab(context.TODO())
)

func ctxTab(ctx context.Context) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&ctx)) }

// plainCtx reports whether ctx is of the type of context.Background() or
// context.TODO().
func plainCtx(ctx context.Context) bool {
	t := ctxTab(ctx)
	return t == backgroundTab || t == todoTab
}

// wordCtx returns the owner in ctx and whether ctx is usable for the word
// path: not nil and not done.
func wordCtx(ctx context.Context) (Owner, bool) {
	if plainCtx(ctx) {
		return 0, true
	}
	if ctx == nil || ctx.Err() != nil {
		return 0, false
	}
	return OwnerOf(ctx), true
}

// lockWord takes the word with one compare-and-swap when it is free and
// nobody waits. When ok is false nothing is held and the caller takes the
// regular path (which also reports a done ctx or a closed handle).
func (h *lockHandle) lockWord(ctx context.Context) (hd Hold, ok bool) {
	owner, live := wordCtx(ctx)
	if !live || h.closedA.Load() {
		return Hold{}, false
	}
	t, ok := h.word.TryLock(uint64(owner))
	if !ok {
		return Hold{}, false
	}
	if h.closedA.Load() {
		h.lockedClosed(ctx, owner)
		return Hold{}, false
	}
	return Hold{token: Token(t), mode: Exclusive, loss: h.wordLoss}, true
}

// lockedClosed gives back a hold just taken on the word of a handle being
// closed, unless Close did. (Close sets closedA and then looks at the word:
// of its look and this Lock's check of closedA after its compare-and-swap,
// at least one sees the other's write.)
func (h *lockHandle) lockedClosed(ctx context.Context, owner Owner) {
	h.mu().Lock()
	if h.wordHeldBy(owner) {
		_ = h.unlockWord(ctx)
	}
	h.mu().Unlock()
}

// wordHeldBy reports whether owner holds the word through this handle
// without the regular bookkeeping.
func (h *lockHandle) wordHeldBy(owner Owner) bool {
	return h.word != nil && h.word.HeldBy(uint64(owner))
}

// wordGrant returns the grant of the hold on the word that the caller has.
func (h *lockHandle) wordGrant() driver.Grant {
	return driver.Grant{Token: h.word.Token(), Loss: h.wordLoss}
}

// unlockWord gives back the hold on the word that the caller has: with one
// compare-and-swap when nobody waits, through the driver otherwise. If the
// handle is closed, Close may have given it back already: the error is
// then ErrClosed.
func (h *lockHandle) unlockWord(ctx context.Context) error {
	if h.word.TryUnlock() {
		return nil
	}
	return h.releaseWord(ctx)
}

// releaseWord is the driver's part of unlockWord.
func (h *lockHandle) releaseWord(ctx context.Context) error {
	if err := h.d.Release(context.WithoutCancel(ctx), h.wordGrant()); err != nil {
		if h.closedA.Load() && errors.Is(err, ErrLost) {
			return ErrClosed
		}
		return err
	}
	return nil
}

// mutexHandle exposes the Mutex methods of a lockHandle only.
type mutexHandle struct{ h *lockHandle }

func (m mutexHandle) Lock(ctx context.Context) (Hold, error) {
	// lockWord spelled out (it is over the inliner's budget): an
	// uncontended Lock is one call.
	h := m.h
	if w := h.word; w != nil && !h.closedA.Load() && h.b.obs.Load() == nil {
		var owner Owner
		live := plainCtx(ctx)
		if !live && ctx != nil && ctx.Err() == nil {
			live, owner = true, OwnerOf(ctx)
		}
		if live {
			if t, ok := w.TryLock(uint64(owner)); ok {
				if !h.closedA.Load() {
					return Hold{token: Token(t), mode: Exclusive, loss: h.wordLoss}, nil
				}
				h.lockedClosed(ctx, owner)
			}
		}
	}
	return h.lockOp("lock", ctx, Exclusive, false)
}

func (m mutexHandle) TryLock(ctx context.Context) (Hold, error) {
	if m.h.word != nil && m.h.b.obs.Load() == nil {
		if hd, ok := m.h.lockWord(ctx); ok {
			return hd, nil
		}
	}
	return m.h.lockOp("trylock", ctx, Exclusive, true)
}

func (m mutexHandle) Unlock(ctx context.Context) error {
	h := m.h
	var owner Owner
	if !plainCtx(ctx) {
		owner = OwnerOf(ctx)
	}
	if w := h.word; w != nil && ctx != nil && w.HeldBy(uint64(owner)) && h.b.obs.Load() == nil {
		if w.TryUnlock() {
			return nil
		}
		return h.unlockOp(ctx, true)
	}
	return h.unlockOp(ctx, false)
}

// unlockOp is the rest of Unlock, with its failure wrapped: through the
// driver for a hold on the word, else the handle's bookkeeping. Kept out of
// line so that Unlock's fast path stays small.
//
//go:noinline
func (h *lockHandle) unlockOp(ctx context.Context, onWord bool) error {
	if o := h.b.observer(); o != nil {
		return h.unlockObserved(o, ctx)
	}
	if onWord {
		return h.fail("unlock", h.releaseWord(ctx))
	}
	return h.fail("unlock", h.unlock(ctx))
}

func (m mutexHandle) Name() string                      { return m.h.name }
func (m mutexHandle) Close() error                      { return m.h.fail("close", m.h.close()) }
func (m mutexHandle) holdCount(ctx context.Context) int { return m.h.holdCount(ctx) }

// rwHandle exposes the RWMutex methods of a lockHandle.
type rwHandle struct{ h *lockHandle }

func (m rwHandle) Lock(ctx context.Context) (Hold, error) {
	return m.h.lockOp("lock", ctx, Exclusive, false)
}
func (m rwHandle) TryLock(ctx context.Context) (Hold, error) {
	return m.h.lockOp("trylock", ctx, Exclusive, true)
}
func (m rwHandle) RLock(ctx context.Context) (Hold, error) {
	h := m.h
	if r := h.r; r.rd != nil && r.writers.Load() == 0 && h.b.obs.Load() == nil && (plainCtx(ctx) || ctx != nil && ctx.Err() == nil && OwnerOf(ctx) == 0) {
		if held, added := r.rd.TryRLock(); held || r.rd.RLock(added) {
			if !h.closedA.Load() {
				return Hold{mode: Shared, loss: r.rloss}, nil
			}
			h.rlockClosed()
		}
	}
	return m.h.lockOp("rlock", ctx, Shared, false)
}
func (m rwHandle) TryRLock(ctx context.Context) (Hold, error) {
	h := m.h
	if r := h.r; r.rd != nil && r.writers.Load() == 0 && h.b.obs.Load() == nil && (plainCtx(ctx) || ctx != nil && ctx.Err() == nil && OwnerOf(ctx) == 0) {
		if held, added := r.rd.TryRLock(); held || r.rd.RLock(added) {
			if !h.closedA.Load() {
				return Hold{mode: Shared, loss: r.rloss}, nil
			}
			h.rlockClosed()
		}
	}
	return m.h.lockOp("tryrlock", ctx, Shared, true)
}
func (m rwHandle) Unlock(ctx context.Context) error { return m.h.unlockOp(ctx, false) }
func (m rwHandle) RUnlock(ctx context.Context) error {
	h := m.h
	if r := h.r; r.rd != nil && r.anonA.Load() == 0 && h.b.obs.Load() == nil && ctx != nil && (lastOwner.Load() == 0 || plainCtx(ctx) || ownerIn(ctx) == 0) {
		if done, taken := r.rd.TryRUnlock(); done || r.rd.RUnlockMore(taken) {
			return nil
		}
	}
	return h.runlockOp(ctx)
}

// runlockOp is the rest of RUnlock, with its failure wrapped. Kept out of
// line so that RUnlock's fast path stays small.
//
//go:noinline
func (h *lockHandle) runlockOp(ctx context.Context) error {
	if o := h.b.observer(); o != nil {
		return h.runlockObserved(o, ctx)
	}
	return h.fail("runlock", h.runlock(ctx))
}
func (m rwHandle) Downgrade(ctx context.Context) (Hold, error) {
	hd, err := m.h.downgrade(ctx)
	if err != nil {
		return Hold{}, m.h.fail("downgrade", err)
	}
	if m.h.b.obs.Load() != nil {
		m.h.downgraded(hd)
	}
	return hd, nil
}
func (m rwHandle) Name() string                      { return m.h.name }
func (m rwHandle) Close() error                      { return m.h.fail("close", m.h.close()) }
func (m rwHandle) holdCount(ctx context.Context) int { return m.h.holdCount(ctx) }

// lockOp is lock with its failure wrapped as op. Kept out of line so that
// Lock's fast path stays small.
//
//go:noinline
func (h *lockHandle) lockOp(op string, ctx context.Context, mode Mode, try bool) (Hold, error) {
	if o := h.b.observer(); o != nil {
		return h.lockObserved(o, op, ctx, mode, try)
	}
	hd, err := h.lock(ctx, mode, try)
	if err != nil {
		return Hold{}, h.fail(op, err)
	}
	return hd, nil
}

var (
	_ Mutex   = mutexHandle{}
	_ RWMutex = rwHandle{}
)
