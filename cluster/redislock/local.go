package redislock

import (
	"context"
	"slices"
	"time"

	"github.com/batonlock/baton/driver"
)

// Handles of one backend pass a Mutex among themselves.
//
// When several handles of one backend (goroutines of one process, each with
// its own handle) want the same Mutex, only one of them at a time talks to
// the server: the others wait in the backend, in FIFO order. A handle that
// unlocks while another of its backend waits passes it the hold it has on
// the server, lease and all, with no round trip; the server only sees one
// long hold. The waiter gets a token above the holder's (the server reserves
// 15 tokens after each acquisition's own for this), and a loss of its own,
// which the lease keeper fires from then on.
//
// Passing is bounded so that clients waiting on the server are not starved:
// a hold is passed at most localPasses times and for at most localFor after
// it was taken on the server. Then the holder releases it on the server,
// which hands it to the head of the server's queue, and the next waiting
// handle of the backend queues there like any other client.

const (
	localPasses = 15                   // tokens the server reserves after each acquisition
	localFor    = 5 * time.Millisecond // how long a hold may go round one backend
)

// localName is the backend's state for one Mutex name, guarded by
// driver.localMu.
type localName struct {
	busy bool           // a handle holds the name on the server or is acquiring it
	q    []*localWaiter // handles waiting for the busy one, FIFO
}

// localWaiter receives either a hold passed on (pass) or the turn to
// acquire on the server.
type localWaiter struct {
	ch chan localTurn // buffered(1); sent to once, after removal from q
}

type localTurn struct {
	pass bool
	g    driver.Grant
}

// localTurnFor waits until the handle may acquire name on the server
// (turn), or is passed a hold by another handle of the backend (ok), or
// ctx is done.
func (d *backend) localTurnFor(ctx context.Context, name string) (g driver.Grant, passed bool, err error) {
	d.localMu.Lock()
	ln := d.local[name]
	if ln == nil {
		ln = &localName{}
		d.local[name] = ln
	}
	if !ln.busy {
		ln.busy = true
		d.localMu.Unlock()
		return driver.Grant{}, false, nil
	}
	w := &localWaiter{ch: make(chan localTurn, 1)}
	ln.q = append(ln.q, w)
	d.localMu.Unlock()
	select {
	case t := <-w.ch:
		return t.g, t.pass, nil
	case <-ctx.Done():
	}
	d.localMu.Lock()
	if i := slices.Index(ln.q, w); i >= 0 {
		ln.q = slices.Delete(ln.q, i, i+1)
		d.localMu.Unlock()
		return driver.Grant{}, false, ctx.Err()
	}
	d.localMu.Unlock()
	// Something was sent before the cancellation was seen: give it on.
	t := <-w.ch
	if t.pass {
		d.passOrRelease(context.WithoutCancel(ctx), name, t.g)
	} else {
		d.localDone(name)
	}
	return driver.Grant{}, false, ctx.Err()
}

// localTry takes the turn for a try-lock: it reports false when another
// handle of the backend holds the name or is acquiring it.
func (d *backend) localTry(name string) bool {
	d.localMu.Lock()
	defer d.localMu.Unlock()
	ln := d.local[name]
	if ln == nil {
		ln = &localName{}
		d.local[name] = ln
	}
	if ln.busy {
		return false
	}
	ln.busy = true
	return true
}

// localDone ends the turn of a handle that holds nothing on the server (it
// failed to acquire, or released): the next waiting handle gets the turn.
func (d *backend) localDone(name string) {
	d.localMu.Lock()
	defer d.localMu.Unlock()
	ln := d.local[name]
	if len(ln.q) == 0 {
		delete(d.local, name)
		return
	}
	w := ln.q[0]
	ln.q = ln.q[1:]
	w.ch <- localTurn{}
}

// localPass passes the hold of g to the next waiting handle, if there is
// one and the hold may still go round. It reports false, changing nothing,
// otherwise.
func (d *backend) localPass(name string, g driver.Grant, h *hold) bool {
	d.localMu.Lock()
	ln := d.local[name]
	// A lease whose deadline is near (a renewal is late: the server is
	// paused or unreachable) is not passed on; it goes back to the server,
	// where the next handle acquires a lease of its own (see fresh).
	if len(ln.q) == 0 || h.passes >= localPasses || time.Since(h.taken) >= localFor ||
		!d.fresh(h.keeper.Deadline().Add(d.o.Drift-d.o.TTL)) {
		d.localMu.Unlock()
		return false
	}
	nh := &hold{id: h.id, keeper: h.keeper, loss: driver.NewLoss(), excl: true, passes: h.passes + 1, taken: h.taken}
	if !h.keeper.Pass(nh.loss) {
		d.localMu.Unlock()
		return false // lost: the release on the server says so
	}
	w := ln.q[0]
	ln.q = ln.q[1:]
	d.localMu.Unlock()
	w.ch <- localTurn{pass: true, g: driver.Grant{Token: g.Token + 1, Loss: nh.loss, Data: nh}}
	return true
}

// releaseMutex passes the Mutex hold h (of grant g) to the next waiting
// handle of the backend, or else releases it on the server: then released
// and err are the release script's reply. keys are the name's keys.
func (d *backend) releaseMutex(ctx context.Context, name string, keys []string, g driver.Grant, h *hold) (passed bool, released int64, err error) {
	if d.localPass(name, g, h) {
		return true, 0, nil
	}
	h.keeper.Stop()
	released, err = scriptMutexRelease.Run(ctx, d.c, keys, h.id).Int64()
	d.localDone(name)
	return false, released, err
}

// passOrRelease gives back a Mutex hold that a cancelled waiter was passed.
func (d *backend) passOrRelease(ctx context.Context, name string, g driver.Grant) {
	h, _ := holdOf(g)
	if _, _, err := d.releaseMutex(ctx, name, mutexKeys(d.o.Prefix, name), g, h); err != nil {
		d.o.Logger.Warn("redislock: releasing a hold passed to a cancelled waiter failed; it expires with the lease",
			"name", name, "err", err)
	}
}
