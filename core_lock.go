package baton

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/word"
)

// lockHandle is the core of Mutex and RWMutex handles: it queues the
// goroutines that share the handle in FIFO order, keeps owners and hold
// counts, and drives one driver.Lock with at most one grant at a time.
//
// Its methods return bare causes; the exported methods (core_word.go) wrap
// them in one *Error.
type lockHandle struct {
	b    *coreBackend
	name string
	d    driver.Lock

	// The word path (mutex drivers that implement driver.WordLocker). A
	// hold taken on the word is not in the fields under mu: the word says
	// that this handle holds it, for which owner, and with which token.
	word     *word.Lock   // nil: no word path
	wordLoss *driver.Loss // goes with every hold taken on the word
	closedA  atomic.Bool  // closed, readable without mu

	// Guarded by mu; here to share a word with closedA.
	acquiring bool // a goroutine is in the driver's Acquire or TryAcquire
	held      bool // a grant is held (writer || readers > 0)
	writer    bool // the grant is Exclusive and held locally

	// When the write hold and the first current read hold began, kept on
	// the observed paths only (core_observe.go); nil until then.
	since atomic.Pointer[holdTimes]

	// A Mutex whose driver is a driver.Passer is on its name's pass line
	// (core_pass.go), and mu is the line's mutex.
	line *passLine

	own sync.Mutex // the handle's mutex, unless it is on a pass line (mu)
	// All below guarded by mu.
	handleQueue // with busy: the holder's Release or Downgrade is in the driver
	grant       driver.Grant
	wOwner      Owner      // owner of the write hold (0: anonymous)
	wCount      int        // write hold count (reentrancy)
	r           *readState // readers of an RWMutex handle; nil for a Mutex
}

// mu returns the handle's mutex: its own, or that of its pass line.
func (h *lockHandle) mu() *sync.Mutex {
	if h.line != nil {
		return &h.line.mu
	}
	return &h.own
}

func newLockHandle(b *coreBackend, kind Kind, name string, d driver.Lock, line *passLine) *lockHandle {
	h := &lockHandle{b: b, name: name, d: d, line: line}
	if kind == KindRWMutex {
		h.r = newReadState(d)
	}
	if wl, ok := d.(driver.WordLocker); ok && kind == KindMutex {
		h.word, h.wordLoss = wl.WordLock()
	}
	return h
}

// fail wraps the cause of a failed op in the handle's *Error.
func (h *lockHandle) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	return h.b.failed(op, h.kind(), h.name, err)
}

func (h *lockHandle) hold() Hold {
	m := Exclusive
	if !h.writer {
		m = Shared
	}
	return newHold(Token(h.grant.Token), m, h.grant.Recovered, h.grant.Loss)
}

// join adds a read hold of owner on the Shared grant held and returns it.
// Entered with h.mu held, returns with it released.
func (h *lockHandle) join(owner Owner) Hold {
	h.addReader(owner)
	hd := h.hold()
	h.mu().Unlock()
	return hd
}

// canAcquire reports whether a goroutine may call the driver for a grant.
// (A hold on the word is not in held: a goroutine that acquires then waits
// in the driver, as another process would.)
func (h *lockHandle) canAcquire() bool { return !h.held && !h.busy && !h.acquiring }

// readersHeld is the number of local read holds.
func (h *lockHandle) readersHeld() int {
	if h.r == nil {
		return 0
	}
	return h.r.readers
}

// ownerReads is the number of read holds of owner.
func (h *lockHandle) ownerReads(owner Owner) int {
	if h.r == nil {
		return 0
	}
	return h.r.owners[owner]
}

func (h *lockHandle) lock(ctx context.Context, mode Mode, try bool) (Hold, error) {
	if ctx == nil {
		return Hold{}, errNilContext
	}
	owner := OwnerOf(ctx)
	h.mu().Lock()
	if h.closed {
		h.mu().Unlock()
		return Hold{}, ErrClosed
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
			h.mu().Unlock()
			return hd, nil
		case h.ownerReads(owner) > 0 && mode == Exclusive:
			h.mu().Unlock()
			return Hold{}, fmt.Errorf("%w: the owner holds a read lock", ErrUpgrade)
		case h.ownerReads(owner) > 0:
			// A reader that already holds joins even behind a waiting writer:
			// waiting would deadlock the owner with itself.
			return h.join(owner), nil
		}
	}
	if err := ctx.Err(); err != nil {
		h.mu().Unlock()
		return Hold{}, err
	}
	if h.line != nil {
		return h.lockLine(ctx, owner, try)
	}
	if h.q.empty() {
		if mode == Shared && h.lateReady() {
			h.probe(ctx)
		}
		if mode == Shared && h.canJoin() {
			return h.join(owner), nil
		}
		if h.canAcquire() {
			return h.acquire(ctx, mode, owner, try, nil)
		}
	}
	if try {
		h.mu().Unlock()
		return Hold{}, ErrLocked
	}
	w := newWaiter(mode, owner, nil)
	h.q.push(w)
	if h.r.queueWriter(mode) {
		defer h.r.unqueueWriter()
	}
	for {
		if h.closed {
			h.q.leave(w)
			h.mu().Unlock()
			return Hold{}, ErrClosed
		}
		if h.q.head == w {
			if mode == Shared && h.lateReady() {
				h.probe(ctx)
				continue // the handle may have closed meanwhile
			}
			if mode == Shared && h.canJoin() {
				h.q.leave(w) // nudges the next, who may join too
				return h.join(owner), nil
			}
			if h.canAcquire() {
				return h.acquire(ctx, mode, owner, false, w)
			}
		}
		// A reader at the head of the queue, behind a Shared grant whose
		// last probe failed, probes again when the pause is over.
		var retry *time.Timer
		var retryC <-chan time.Time
		if mode == Shared && h.q.head == w && h.joinable() && !h.r.probing {
			retry = time.NewTimer(max(time.Until(h.r.probeAt), 0))
			retryC = retry.C
		}
		h.mu().Unlock()
		select {
		case <-retryC:
			h.mu().Lock()
		case <-w.ch:
			h.mu().Lock()
			if err := ctx.Err(); err != nil {
				h.q.leave(w)
				h.mu().Unlock()
				return Hold{}, err
			}
		case <-ctx.Done():
			h.mu().Lock()
			h.q.leave(w)
			h.mu().Unlock()
			return Hold{}, ctx.Err()
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// acquire calls the driver for a grant. It is entered with h.mu held and the
// handle idle, and returns with h.mu released.
func (h *lockHandle) acquire(ctx context.Context, mode Mode, owner Owner, try bool, w *waiter) (Hold, error) {
	if w != nil {
		h.q.pop() // w is the head; others stay queued behind acquiring
	}
	h.acquiring = true
	g, err := h.callDriver(ctx, mode, try)
	if h.word != nil && err == nil {
		h.word.Granted()
	}
	h.mu().Lock()
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
		h.mu().Unlock()
		rerr := h.d.Release(context.WithoutCancel(ctx), g)
		h.mu().Lock()
		err = cause
		if rerr != nil {
			err = fmt.Errorf("%w (releasing: %v)", cause, rerr)
		}
	}
	h.acquiring = false
	h.idle.broadcast()
	if err != nil {
		h.q.kick()
		return Hold{}, h.failed(h.mu(), err)
	}
	h.held = true
	h.grant = g
	if mode == Exclusive {
		h.writer, h.wOwner, h.wCount = true, owner, 1
	} else {
		h.addReader(owner)
		h.r.batchEnd = time.Now().Add(readBatch)
		h.r.probeAt, h.r.probeWait = time.Time{}, 0
		h.q.kick() // queued readers may share the grant
	}
	hd := h.hold()
	h.mu().Unlock()
	return hd, nil
}

// callDriver runs the driver's acquisition: entered with h.mu held, returns
// with it released.
func (h *lockHandle) callDriver(ctx context.Context, mode Mode, try bool) (driver.Grant, error) {
	m := driver.Mode(mode)
	return h.handleQueue.callDriver(h.mu(), ctx, try, cheap(h.d),
		func(ctx context.Context) (driver.Grant, error) { return h.d.TryAcquire(ctx, m) },
		func(ctx context.Context) (driver.Grant, error) { return h.d.Acquire(ctx, m) })
}

// waitIdle waits until no Release or Downgrade of the holder is in
// progress. It does not wait for a goroutine inside Acquire: with a hold on
// the word, that goroutine may be waiting for the very hold being released.
// h.mu is held.
func (h *lockHandle) waitIdle() {
	for h.busy {
		h.idle.wait(h.mu())
	}
}

// waitQuiet waits until no driver call at all is in progress (for Close,
// which has cancelled any Acquire; a probe returns promptly). h.mu is held.
func (h *lockHandle) waitQuiet() {
	for h.busy || h.acquiring || h.r != nil && h.r.probing {
		h.idle.wait(h.mu())
	}
}

// releaseGrant gives the grant back to the driver (or, on a pass line, to
// the next in line). It is entered with h.mu held and the local holds
// already cleared, and returns with h.mu released.
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
	h.mu().Unlock()
	err := h.d.Release(context.WithoutCancel(ctx), g)
	h.mu().Lock()
	h.busy = false
	h.idle.broadcast()
	h.q.kick()
	h.mu().Unlock()
	return err
}

func (h *lockHandle) unlock(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	owner := OwnerOf(ctx)
	if h.wordHeldBy(owner) {
		return h.unlockWord(ctx)
	}
	h.mu().Lock()
	h.waitIdle()
	if !h.writer || h.wOwner != owner {
		return h.failed(h.mu(), ErrNotHeld)
	}
	h.wCount--
	if h.wCount > 0 {
		h.mu().Unlock()
		return nil
	}
	h.wOwner = 0
	if h.readersHeld() > 0 {
		// The owner still holds read locks taken under its write lock:
		// keep them, atomically.
		return h.downgradeLocked(ctx)
	}
	return h.releaseGrant(ctx)
}

// holdCount reports how many write holds the owner in ctx has.
func (h *lockHandle) holdCount(ctx context.Context) int {
	owner := OwnerOf(ctx)
	if h.wordHeldBy(owner) {
		return 1
	}
	h.mu().Lock()
	defer h.mu().Unlock()
	if h.writer && h.wOwner == owner {
		return h.wCount
	}
	return 0
}

func (h *lockHandle) close() error {
	h.mu().Lock()
	if h.closed {
		h.mu().Unlock()
		return nil
	}
	h.closeQueue()
	h.closedA.Store(true)
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
		if uerr := h.unlockWord(context.Background()); uerr != nil && !isAny(uerr, ErrLost, ErrClosed) {
			err = uerr
		}
	}
	if h.held {
		h.r.clear()
		h.wCount, h.wOwner = 0, 0
		err = h.releaseGrant(context.Background())
		h.mu().Lock()
	}
	var spare driver.Lock
	if h.r != nil {
		spare = h.r.spare
	}
	h.mu().Unlock()
	if cerr := h.d.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if spare != nil {
		if cerr := spare.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	h.b.forget(h)
	return err
}
