package baton

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/word"
)

// Readers of one handle share one Shared grant of the driver; this file
// keeps their holds and decides when a new reader may join it. Anonymous
// readers of a driver that counts them take the count path instead while
// they can (core_rcount.go).

// readState is the reader bookkeeping of an RWMutex handle, guarded by the
// handle's mutex but for the count path's fields.
type readState struct {
	// The count path (driver.ReadCounter); rd is nil without one.
	rd      *word.Readers
	rloss   *driver.Loss
	anonA   atomic.Int64 // anon, readable without mu
	writers atomic.Int32 // writers of the handle queued in lock

	readers   int // local read holds, owned and anonymous
	anon      int // anonymous read holds (part of readers)
	owners    map[Owner]int
	batchEnd  time.Time   // the Shared grant admits new readers until then
	probing   bool        // a reader is asking the backend through spare
	spare     driver.Lock // second driver of the name, for probe; nil until needed
	probeAt   time.Time   // no probe before then (the last one failed)
	probeWait time.Duration
}

func (h *lockHandle) addReader(owner Owner) {
	r := h.r
	r.readers++
	if owner == 0 {
		r.anon++
		r.anonA.Store(int64(r.anon))
		return
	}
	if r.owners == nil {
		r.owners = make(map[Owner]int)
	}
	r.owners[owner]++
}

// drop takes off one read hold of owner, and reports false if it has none.
func (r *readState) drop(owner Owner) bool {
	switch {
	case owner == 0 && r.anon > 0:
		r.anon--
		r.anonA.Store(int64(r.anon))
	case owner != 0 && r.owners[owner] > 0:
		if r.owners[owner]--; r.owners[owner] == 0 {
			delete(r.owners, owner)
		}
	default:
		return false
	}
	r.readers--
	return true
}

// clear forgets every read hold.
func (r *readState) clear() {
	if r != nil {
		r.readers, r.anon, r.owners = 0, 0, nil
		r.anonA.Store(0)
	}
}

// readBatch is how long a Shared grant admits new local readers without
// asking the backend. Local readers share one grant of the backend; if they
// could join it unchecked, a steady stream of them would keep the grant
// alive and starve writers of other handles. After readBatch a new reader
// joins only once the backend confirms that no writer holds or waits (see
// probe), which opens another window; otherwise it queues until the grant
// drains and is taken again, behind the writer.
const readBatch = 5 * time.Millisecond

// maxProbeWait bounds the pause between two probes of a queued reader.
// A probe can fail with no writer about (a network error, or another
// process's reader passing through the flock gate), and a reader queued
// behind a grant that never drains must ask again.
const maxProbeWait = 100 * time.Millisecond

// joinable reports whether the handle holds a Shared grant that no call
// into the driver is changing.
func (h *lockHandle) joinable() bool {
	return h.r != nil && h.held && !h.writer && !h.busy && !h.acquiring
}

// canJoin reports whether a new reader may share the current grant.
func (h *lockHandle) canJoin() bool {
	return h.joinable() && !h.closed && time.Now().Before(h.r.batchEnd)
}

// lateReady reports whether a reader that may not join the grant (its
// window closed) should probe the backend now.
func (h *lockHandle) lateReady() bool {
	if !h.joinable() || h.closed || h.r.probing {
		return false
	}
	now := time.Now()
	return !now.Before(h.r.batchEnd) && !now.Before(h.r.probeAt)
}

// probe asks the backend whether a writer of another handle holds or
// waits, by trying a read lock through a second driver of the name: the
// backend refuses it exactly when it would make a new reader wait, so its
// own writer preference decides. When it is granted (and given back at
// once), the handle's grant admits readers for another readBatch.
// Entered and left with h.mu held.
func (h *lockHandle) probe(ctx context.Context) {
	h.r.probing = true
	sp := h.r.spare
	h.mu().Unlock()
	var err error
	if sp == nil {
		var d driver.Lock
		if d, err = h.b.d.OpenRWMutex(ctx, h.name); err == nil {
			sp = d
		}
	}
	free := false
	if err == nil {
		var g driver.Grant
		if g, err = sp.TryAcquire(ctx, driver.Shared); err == nil {
			free = true
			_ = sp.Release(context.WithoutCancel(ctx), g)
		}
	}
	h.mu().Lock()
	h.r.spare = sp
	h.r.probing = false
	h.idle.broadcast()
	now := time.Now()
	if free {
		h.r.probeWait = 0
		if h.joinable() {
			h.r.batchEnd = now.Add(readBatch)
		}
	} else {
		h.r.probeWait = min(max(2*h.r.probeWait, readBatch), maxProbeWait)
		h.r.probeAt = now.Add(h.r.probeWait)
	}
	h.q.kick()
}

// downgradeLocked turns the held Exclusive grant into a Shared one. Entered
// with h.mu held, writer cleared of its owner; returns with h.mu released.
func (h *lockHandle) downgradeLocked(ctx context.Context) error {
	g := h.grant
	h.busy = true
	h.mu().Unlock()
	ng, err := h.d.Downgrade(context.WithoutCancel(ctx), g)
	h.mu().Lock()
	h.busy = false
	h.idle.broadcast()
	if err != nil {
		// The hold cannot be kept in read mode: give it up entirely so
		// that the handle stays consistent, and report why.
		h.r.clear()
		h.wCount = 0
		if rerr := h.releaseGrant(ctx); rerr != nil {
			return fmt.Errorf("%w (release: %v)", err, rerr)
		}
		return err
	}
	h.grant = ng
	h.writer = false
	h.r.batchEnd = time.Now().Add(readBatch)
	h.q.kick()
	h.mu().Unlock()
	return nil
}

func (h *lockHandle) downgrade(ctx context.Context) (Hold, error) {
	if ctx == nil {
		return Hold{}, errNilContext
	}
	owner := OwnerOf(ctx)
	h.mu().Lock()
	h.waitIdle()
	if !h.writer || h.wOwner != owner {
		h.mu().Unlock()
		return Hold{}, ErrNotHeld
	}
	if h.wCount != 1 {
		h.mu().Unlock()
		return Hold{}, fmt.Errorf("%w: downgrade of a write lock held %d times", ErrInvalidArgument, h.wCount)
	}
	h.wCount = 0
	h.wOwner = 0
	h.addReader(owner)
	if err := h.downgradeLocked(ctx); err != nil {
		return Hold{}, err
	}
	h.mu().Lock()
	hd := h.hold()
	h.mu().Unlock()
	return hd, nil
}

func (h *lockHandle) runlock(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	owner := OwnerOf(ctx)
	h.mu().Lock()
	h.waitIdle()
	if !h.r.drop(owner) {
		if owner == 0 {
			if done, err := h.runlockCount(); done {
				h.mu().Unlock()
				return err
			}
		}
		return h.failed(h.mu(), ErrNotHeld)
	}
	if h.r.readers > 0 || h.writer {
		h.mu().Unlock()
		return nil
	}
	return h.releaseGrant(ctx)
}
