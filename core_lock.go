package baton

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/word"
)

// waiter is a goroutine queued on a handle.
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

// lockHandle is the core of Mutex and RWMutex handles: it queues the
// goroutines that share the handle in FIFO order, keeps owners and hold
// counts, and drives one driver.Lock with at most one grant at a time.
type lockHandle struct {
	b    *coreBackend
	name string
	kind Kind
	d    driver.Lock

	// The word path (mutex drivers that implement driver.WordLocker). A
	// hold taken on the word is not in the fields under mu: the word says
	// that this handle holds it, for which owner, and with which token.
	word     *word.Lock   // nil: no word path
	wordLoss *driver.Loss // goes with every hold taken on the word
	closedA  atomic.Bool  // closed, readable without mu

	// Passers (mutex drivers that implement driver.Passer): line is the
	// name's queue across the handles of the Backend, and mu is the line's.
	line *passLine
	pass driver.Passer

	mu  *sync.Mutex // &own, or the line's mutex
	own sync.Mutex
	// All below guarded by mu.
	closed    bool
	acquiring bool               // a goroutine is in the driver's Acquire or TryAcquire
	busy      bool               // the holder's Release or Downgrade is in the driver
	idle      *sync.Cond         // signalled when acquiring or busy becomes false
	cancelAcq context.CancelFunc // cancels the Acquire in progress, for Close
	held      bool               // a grant is held (writer || readers > 0)
	grant     driver.Grant
	writer    bool  // the grant is Exclusive and held locally
	wOwner    Owner // owner of the write hold (0: anonymous)
	wCount    int   // write hold count (reentrancy)
	readers   int   // local read holds, owned and anonymous
	anon      int   // anonymous read holds (part of readers)
	rOwners   map[Owner]int
	batchEnd  time.Time   // Shared grant admits new readers until then
	q         []*waiter   // FIFO of goroutines waiting for their turn
	probing   bool        // a reader is asking the backend through spare
	spare     driver.Lock // second driver of the name, for probe; nil until needed
	probeAt   time.Time   // no probe before then (the last one failed)
	probeWait time.Duration
}

func newLockHandle(b *coreBackend, kind Kind, name string, d driver.Lock, line *passLine) *lockHandle {
	h := &lockHandle{b: b, name: name, kind: kind, d: d}
	h.mu = &h.own
	if line != nil {
		h.line, h.pass, h.mu = line, d.(driver.Passer), &line.mu
	}
	h.idle = sync.NewCond(h.mu)
	if wl, ok := d.(driver.WordLocker); ok && kind == KindMutex {
		h.word, h.wordLoss = wl.WordLock()
	}
	return h
}

func (h *lockHandle) errf(format string, args ...any) error {
	return fmt.Errorf("baton: %s %q: "+format, append([]any{h.kind, h.name}, args...)...)
}

func (h *lockHandle) hold() Hold {
	m := Exclusive
	if !h.writer {
		m = Shared
	}
	return newHold(Token(h.grant.Token), m, h.grant.Recovered, h.grant.Loss)
}

// kick nudges the head of the queue to re-check the state. Readers that
// join pass the nudge on, so consecutive readers at the head all join.
func (h *lockHandle) kick() {
	if len(h.q) > 0 {
		select {
		case h.q[0].ch <- struct{}{}:
		default:
		}
	}
}

func (h *lockHandle) remove(w *waiter) {
	for i, x := range h.q {
		if x == w {
			h.q = append(h.q[:i], h.q[i+1:]...)
			if i == 0 {
				h.kick()
			}
			return
		}
	}
}

// canAcquire reports whether a goroutine may call the driver for a grant.
// (A hold on the word is not in held: a goroutine that acquires then waits
// in the driver, as another process would.)
func (h *lockHandle) canAcquire() bool { return !h.held && !h.busy && !h.acquiring }

func (h *lockHandle) addReader(owner Owner) {
	h.readers++
	if owner == 0 {
		h.anon++
		return
	}
	if h.rOwners == nil {
		h.rOwners = make(map[Owner]int)
	}
	h.rOwners[owner]++
}

func (h *lockHandle) lock(ctx context.Context, mode Mode, try bool) (Hold, error) {
	if ctx == nil {
		return Hold{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	owner := OwnerOf(ctx)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return Hold{}, h.errf("%w", ErrClosed)
	}
	if owner != 0 && h.wordHeldBy(owner) {
		// The owner locks again what it took on the word: move the hold
		// into the regular bookkeeping, which counts reentrancy.
		h.word.Granted()
		h.held, h.grant = true, h.wordGrant()
		h.writer, h.wOwner, h.wCount = true, owner, 1
	}
	if owner != 0 {
		switch {
		case h.writer && h.wOwner == owner:
			if mode == Exclusive {
				h.wCount++
			} else {
				h.addReader(owner)
			}
			hd := h.hold()
			h.mu.Unlock()
			return hd, nil
		case h.rOwners[owner] > 0 && mode == Exclusive:
			h.mu.Unlock()
			return Hold{}, h.errf("%w: the owner holds a read lock", ErrUpgrade)
		case h.rOwners[owner] > 0:
			// A reader that already holds joins even behind a waiting writer:
			// waiting would deadlock the owner with itself.
			h.addReader(owner)
			hd := h.hold()
			h.mu.Unlock()
			return hd, nil
		}
	}
	if err := ctx.Err(); err != nil {
		h.mu.Unlock()
		return Hold{}, h.errf("%w", err)
	}
	if h.line != nil {
		return h.lockLine(ctx, owner, try)
	}
	if len(h.q) == 0 {
		if mode == Shared && h.lateReady() {
			h.probe(ctx)
		}
		if mode == Shared && h.canJoin() {
			h.addReader(owner)
			hd := h.hold()
			h.mu.Unlock()
			return hd, nil
		}
		if h.canAcquire() {
			return h.acquire(ctx, mode, owner, try, nil)
		}
	}
	if try {
		h.mu.Unlock()
		return Hold{}, h.errf("%w", ErrLocked)
	}
	w := &waiter{mode: mode, owner: owner, ch: make(chan struct{}, 1)}
	h.q = append(h.q, w)
	for {
		if h.closed {
			h.remove(w)
			h.mu.Unlock()
			return Hold{}, h.errf("%w", ErrClosed)
		}
		if h.q[0] == w {
			if mode == Shared && h.lateReady() {
				h.probe(ctx)
				continue // the handle may have closed meanwhile
			}
			if mode == Shared && h.canJoin() {
				h.remove(w) // nudges the next, who may join too
				h.addReader(owner)
				hd := h.hold()
				h.mu.Unlock()
				return hd, nil
			}
			if h.canAcquire() {
				return h.acquire(ctx, mode, owner, false, w)
			}
		}
		// A reader at the head of the queue, behind a Shared grant whose
		// last probe failed, probes again when the pause is over.
		var retry *time.Timer
		var retryC <-chan time.Time
		if mode == Shared && h.q[0] == w && h.joinable() && !h.probing {
			retry = time.NewTimer(max(time.Until(h.probeAt), 0))
			retryC = retry.C
		}
		h.mu.Unlock()
		select {
		case <-retryC:
			h.mu.Lock()
		case <-w.ch:
			h.mu.Lock()
			if err := ctx.Err(); err != nil {
				h.remove(w)
				h.mu.Unlock()
				return Hold{}, h.errf("%w", err)
			}
		case <-ctx.Done():
			h.mu.Lock()
			h.remove(w)
			h.mu.Unlock()
			return Hold{}, h.errf("%w", ctx.Err())
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// The dynamic types of context.Background() and context.TODO(): a context
// of either type has no values and is never done, so the word path can skip
// asking it (two dynamic calls, a fifth of an uncontended Lock+Unlock).
var (
	backgroundType = reflect.TypeOf(context.Background())
	todoType       = reflect.TypeOf(context.TODO())
)

// plainCtx reports whether ctx is of the type of context.Background() or
// context.TODO().
func plainCtx(ctx context.Context) bool {
	t := reflect.TypeOf(ctx)
	return t == backgroundType || t == todoType
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
	h.mu.Lock()
	if h.wordHeldBy(owner) {
		_ = h.unlockWord(ctx)
	}
	h.mu.Unlock()
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
			return h.errf("%w", ErrClosed)
		}
		return fmt.Errorf("baton: %s %q: unlock: %w", h.kind, h.name, err)
	}
	return nil
}

// acquire calls the driver for a grant. It is entered with h.mu held and the
// handle idle, and returns with h.mu released.
func (h *lockHandle) acquire(ctx context.Context, mode Mode, owner Owner, try bool, w *waiter) (Hold, error) {
	if w != nil {
		h.q = h.q[1:] // w is the head; others stay queued behind acquiring
	}
	h.acquiring = true
	g, err := h.callDriver(ctx, mode, try)
	if h.word != nil && err == nil {
		h.word.Granted()
	}
	h.mu.Lock()
	h.cancelAcq = nil
	if err == nil && (h.closed || ctx.Err() != nil) {
		// Closed meanwhile, or ctx ended before the grant reached the
		// caller: the context wins and the grant goes back. Still
		// acquiring, so Close waits for this Release before it closes the
		// driver.
		cause := ErrClosed
		if !h.closed {
			cause = ctx.Err()
		}
		h.mu.Unlock()
		rerr := h.d.Release(context.WithoutCancel(ctx), g)
		h.mu.Lock()
		err = h.errf("%w", cause)
		if rerr != nil {
			err = h.errf("%w (releasing: %v)", cause, rerr)
		}
	}
	h.acquiring = false
	h.idle.Broadcast()
	if err != nil {
		h.kick()
		closed := h.closed
		h.mu.Unlock()
		if closed {
			return Hold{}, h.errf("%w", ErrClosed)
		}
		return Hold{}, err
	}
	h.held = true
	h.grant = g
	if mode == Exclusive {
		h.writer, h.wOwner, h.wCount = true, owner, 1
	} else {
		h.addReader(owner)
		h.batchEnd = time.Now().Add(readBatch)
		h.probeAt, h.probeWait = time.Time{}, 0
		h.kick() // queued readers may share the grant
	}
	hd := h.hold()
	h.mu.Unlock()
	return hd, nil
}

// callDriver runs the driver's acquisition. It is entered with h.mu held
// and returns with h.mu released. Drivers whose TryAcquire is cheap are tried
// first, so that an uncontended Lock does not pay for a cancellable wait.
func (h *lockHandle) callDriver(ctx context.Context, mode Mode, try bool) (driver.Grant, error) {
	tf, cheap := h.d.(driver.TryFirst)
	if try || cheap && tf.TryFirst() {
		h.mu.Unlock()
		g, err := h.d.TryAcquire(ctx, driver.Mode(mode))
		if try || !errors.Is(err, ErrLocked) {
			return g, err
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return driver.Grant{}, h.errf("%w", ErrClosed)
		}
	}
	// Close cancels the wait through cancelAcq.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.cancelAcq = cancel
	h.mu.Unlock()
	return h.d.Acquire(actx, driver.Mode(mode))
}

// waitIdle waits until no Release or Downgrade of the holder is in
// progress. It does not wait for a goroutine inside Acquire: with a hold on
// the word, that goroutine may be waiting for the very hold being released.
// h.mu is held.
func (h *lockHandle) waitIdle() {
	for h.busy {
		h.idle.Wait()
	}
}

// waitQuiet waits until no driver call at all is in progress (for Close,
// which has cancelled any Acquire; a probe returns promptly). h.mu is held.
func (h *lockHandle) waitQuiet() {
	for h.busy || h.acquiring || h.probing {
		h.idle.Wait()
	}
}

// releaseGrant gives the grant back to the driver. It is entered with h.mu
// held and the local holds already cleared, and returns with h.mu released.
func (h *lockHandle) releaseGrant(ctx context.Context) error {
	g := h.grant
	h.held, h.grant, h.writer = false, driver.Grant{}, false
	if h.line != nil {
		return h.passOn(ctx, g)
	}
	h.busy = true
	if h.word != nil {
		h.word.Releasing()
	}
	h.mu.Unlock()
	err := h.d.Release(context.WithoutCancel(ctx), g)
	h.mu.Lock()
	h.busy = false
	h.idle.Broadcast()
	h.kick()
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("baton: %s %q: unlock: %w", h.kind, h.name, err)
	}
	return nil
}

func (h *lockHandle) unlock(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	owner := OwnerOf(ctx)
	if h.wordHeldBy(owner) {
		return h.unlockWord(ctx)
	}
	h.mu.Lock()
	h.waitIdle()
	if !h.writer || h.wOwner != owner {
		closed := h.closed
		h.mu.Unlock()
		if closed {
			return h.errf("%w", ErrClosed)
		}
		return h.errf("unlock: %w", ErrNotHeld)
	}
	h.wCount--
	if h.wCount > 0 {
		h.mu.Unlock()
		return nil
	}
	h.wOwner = 0
	if h.readers > 0 {
		// The owner still holds read locks taken under its write lock:
		// keep them, atomically.
		return h.downgradeLocked(ctx)
	}
	return h.releaseGrant(ctx)
}

// downgradeLocked turns the held Exclusive grant into a Shared one. Entered
// with h.mu held, writer cleared of its owner; returns with h.mu released.
func (h *lockHandle) downgradeLocked(ctx context.Context) error {
	g := h.grant
	h.busy = true
	h.mu.Unlock()
	ng, err := h.d.Downgrade(context.WithoutCancel(ctx), g)
	h.mu.Lock()
	h.busy = false
	h.idle.Broadcast()
	if err != nil {
		// The hold cannot be kept in read mode: give it up entirely so
		// that the handle stays consistent, and report why.
		h.readers, h.anon, h.rOwners = 0, 0, nil
		h.wCount = 0
		rerr := h.releaseGrant(ctx)
		if rerr != nil {
			return fmt.Errorf("baton: %s %q: downgrade: %w (release: %v)", h.kind, h.name, err, rerr)
		}
		return fmt.Errorf("baton: %s %q: downgrade: %w", h.kind, h.name, err)
	}
	h.grant = ng
	h.writer = false
	h.batchEnd = time.Now().Add(readBatch)
	h.kick()
	h.mu.Unlock()
	return nil
}

func (h *lockHandle) downgrade(ctx context.Context) (Hold, error) {
	if ctx == nil {
		return Hold{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	owner := OwnerOf(ctx)
	h.mu.Lock()
	h.waitIdle()
	if !h.writer || h.wOwner != owner {
		h.mu.Unlock()
		return Hold{}, h.errf("downgrade: %w", ErrNotHeld)
	}
	if h.wCount != 1 {
		h.mu.Unlock()
		return Hold{}, h.errf("%w: downgrade of a write lock held %d times", ErrInvalidArgument, h.wCount)
	}
	h.wCount = 0
	h.wOwner = 0
	h.addReader(owner)
	if err := h.downgradeLocked(ctx); err != nil {
		return Hold{}, err
	}
	h.mu.Lock()
	hd := h.hold()
	h.mu.Unlock()
	return hd, nil
}

func (h *lockHandle) runlock(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	owner := OwnerOf(ctx)
	h.mu.Lock()
	h.waitIdle()
	switch {
	case owner == 0 && h.anon > 0:
		h.anon--
	case owner != 0 && h.rOwners[owner] > 0:
		if h.rOwners[owner]--; h.rOwners[owner] == 0 {
			delete(h.rOwners, owner)
		}
	default:
		closed := h.closed
		h.mu.Unlock()
		if closed {
			return h.errf("%w", ErrClosed)
		}
		return h.errf("runlock: %w", ErrNotHeld)
	}
	h.readers--
	if h.readers > 0 || h.writer {
		h.mu.Unlock()
		return nil
	}
	return h.releaseGrant(ctx)
}

// holdCount reports how many write holds the owner in ctx has.
func (h *lockHandle) holdCount(ctx context.Context) int {
	owner := OwnerOf(ctx)
	if h.wordHeldBy(owner) {
		return 1
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.writer && h.wOwner == owner {
		return h.wCount
	}
	return 0
}

func (h *lockHandle) close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.closedA.Store(true)
	if h.cancelAcq != nil {
		h.cancelAcq()
	}
	for _, w := range h.q {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	if h.line != nil {
		h.line.leave(h)
	}
	h.waitQuiet()
	var err error
	if w := h.word; w != nil && w.HeldOnWord() {
		// A hold of the handle on the word (or one being taken, whose Lock
		// then finds it given back). Its owner's Unlock may be giving it
		// back at this moment too: whichever comes second finds the word
		// not the handle's any more, and Close does not mind.
		if uerr := h.unlockWord(context.Background()); uerr != nil && !errors.Is(uerr, ErrLost) && !errors.Is(uerr, ErrClosed) {
			err = uerr
		}
	}
	if h.held {
		h.readers, h.anon, h.rOwners, h.wCount, h.wOwner = 0, 0, nil, 0, 0
		err = h.releaseGrant(context.Background())
		h.mu.Lock()
	}
	spare := h.spare
	h.mu.Unlock()
	if cerr := h.d.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("baton: %s %q: close: %w", h.kind, h.name, cerr)
	}
	if spare != nil {
		if cerr := spare.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("baton: %s %q: close: %w", h.kind, h.name, cerr)
		}
	}
	h.b.forget(h)
	return err
}

// mutexHandle exposes the Mutex methods of a lockHandle only.
type mutexHandle struct{ h *lockHandle }

func (m mutexHandle) Lock(ctx context.Context) (Hold, error) {
	// lockWord spelled out (it is over the inliner's budget): an
	// uncontended Lock is one call.
	h := m.h
	if w := h.word; w != nil && !h.closedA.Load() {
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
	return h.lock(ctx, Exclusive, false)
}

func (m mutexHandle) TryLock(ctx context.Context) (Hold, error) {
	if m.h.word != nil {
		if hd, ok := m.h.lockWord(ctx); ok {
			return hd, nil
		}
	}
	return m.h.lock(ctx, Exclusive, true)
}

func (m mutexHandle) Unlock(ctx context.Context) error {
	h := m.h
	var owner Owner
	if !plainCtx(ctx) {
		owner = OwnerOf(ctx)
	}
	if w := h.word; w != nil && ctx != nil && w.HeldBy(uint64(owner)) {
		if w.TryUnlock() {
			return nil
		}
		return h.releaseWord(ctx)
	}
	return h.unlock(ctx)
}

func (m mutexHandle) Name() string                      { return m.h.name }
func (m mutexHandle) Close() error                      { return m.h.close() }
func (m mutexHandle) holdCount(ctx context.Context) int { return m.h.holdCount(ctx) }

// rwHandle exposes the RWMutex methods of a lockHandle.
type rwHandle struct{ h *lockHandle }

func (m rwHandle) Lock(ctx context.Context) (Hold, error)      { return m.h.lock(ctx, Exclusive, false) }
func (m rwHandle) TryLock(ctx context.Context) (Hold, error)   { return m.h.lock(ctx, Exclusive, true) }
func (m rwHandle) Unlock(ctx context.Context) error            { return m.h.unlock(ctx) }
func (m rwHandle) RLock(ctx context.Context) (Hold, error)     { return m.h.lock(ctx, Shared, false) }
func (m rwHandle) TryRLock(ctx context.Context) (Hold, error)  { return m.h.lock(ctx, Shared, true) }
func (m rwHandle) RUnlock(ctx context.Context) error           { return m.h.runlock(ctx) }
func (m rwHandle) Downgrade(ctx context.Context) (Hold, error) { return m.h.downgrade(ctx) }
func (m rwHandle) Name() string                                { return m.h.name }
func (m rwHandle) Close() error                                { return m.h.close() }
func (m rwHandle) holdCount(ctx context.Context) int           { return m.h.holdCount(ctx) }

var (
	_ Mutex   = mutexHandle{}
	_ RWMutex = rwHandle{}
)
