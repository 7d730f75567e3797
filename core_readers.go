package baton

import (
	"context"
	"time"

	"github.com/batonlock/baton/driver"
)

// Readers of one handle share one Shared grant of the driver; this file
// decides when a new reader may join it.

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
func (h *lockHandle) joinable() bool { return h.held && !h.writer && !h.busy && !h.acquiring }

// canJoin reports whether a new reader may share the current grant.
func (h *lockHandle) canJoin() bool {
	return h.joinable() && !h.closed && time.Now().Before(h.batchEnd)
}

// lateReady reports whether a reader that may not join the grant (its
// window closed) should probe the backend now.
func (h *lockHandle) lateReady() bool {
	if !h.joinable() || h.closed || h.probing {
		return false
	}
	now := time.Now()
	return !now.Before(h.batchEnd) && !now.Before(h.probeAt)
}

// probe asks the backend whether a writer of another handle holds or
// waits, by trying a read lock through a second driver of the name: the
// backend refuses it exactly when it would make a new reader wait, so its
// own writer preference decides. When it is granted (and given back at
// once), the handle's grant admits readers for another readBatch.
// Entered and left with h.mu held.
func (h *lockHandle) probe(ctx context.Context) {
	h.probing = true
	sp := h.spare
	h.mu.Unlock()
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
	h.mu.Lock()
	h.spare = sp
	h.probing = false
	h.idle.Broadcast()
	now := time.Now()
	if free {
		h.probeWait = 0
		if h.joinable() {
			h.batchEnd = now.Add(readBatch)
		}
	} else {
		h.probeWait = min(max(2*h.probeWait, readBatch), maxProbeWait)
		h.probeAt = now.Add(h.probeWait)
	}
	h.kick()
}
