package etcdlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// Causes of a hold's loss: errRemoved when the watch of the hold's
// directory (or a Remove through its own Backend) saw its key deleted by
// someone else (Inspector's Remove, `baton rm`, or any etcd client),
// errHoldGone when Unlock or Downgrade found the key gone.
var (
	errRemoved  = errors.New("the hold's key was deleted by someone else")
	errHoldGone = errors.New("the hold's key is gone")
)

// holdWatch is one hold's place in the watch of its key's directory: it
// fires the hold's loss when the key is deleted while the hold still has
// it. The lease keeps the key only while the session lives; a delete by
// anyone else would otherwise go unnoticed until Unlock.
type holdWatch struct {
	dw       *dirWatch // nil when the session had ended at the grant
	key      string
	rev      int64       // the key's create revision: deletes after it are losses
	released atomic.Bool // set by Release before its own delete is sent
	// The loss of the hold that has the key now; guarded by dw.mu, so that
	// a pass either comes first and its loss fires, or sees the old one
	// fired and refuses.
	loss *driver.Loss
}

// dirWatch watches the deletes under one directory (a name's q/, a
// queue's c/) for the holds of one session there, and dispatches each to
// the holds of its key.
//
// Why one watch per directory and not one per hold: setting a watch up and
// tearing it down are two exchanges with the server per hold, where a
// watch kept across holds costs one event per release. The watch outlives
// its last hold by watchLinger, so a name taken in a loop keeps it, and
// ends then, so that a name taken once does not keep receiving its
// directory's deletes. Only deletes are watched: a key's create revision
// changes only through a delete.
//
// Nothing of an event is lost between a grant and its hold's entry here:
// deleted keeps the last delete of each key since floor, and a hold
// created at or after floor is checked against it when it arrives; an
// older hold (the watch started, or started again, after its write) is
// checked by reading its key, as are the holds already in place when the
// watch starts again after a break.
//
// Ordering: a delete reaches this watch when it reaches the watch of the
// next waiter, which still needs a read before it holds; so the loss
// normally fires about one round trip before another client can be granted
// the name. It cannot be ordered before the return of a Remove made in
// another process; a Remove through the holder's own Backend fires the loss
// itself before returning (session.removed).
type dirWatch struct {
	b    *backend
	s    *session
	dir  string
	stop context.CancelFunc

	mu      sync.Mutex
	holds   map[string][]*holdWatch // guarded by mu: holds not given back, by key
	n       int                     // guarded by mu: how many
	synced  bool                    // guarded by mu: a watch is up, from floor on
	floor   int64                   // guarded by mu
	deleted map[string]int64        // guarded by mu: last delete of a key, after floor
	idle    *time.Timer             // guarded by mu: ends the watch when it has no hold
	done    bool                    // guarded by mu: ended; holds go to a new dirWatch
	cancel  context.CancelFunc      // guarded by mu: ends the current watch (tests)
}

const (
	// watchLinger is how long a directory's watch outlives its last hold.
	watchLinger = 5 * time.Second
	// maxDeleted bounds deleted; past it, it starts again empty, and holds
	// older than that read their key instead.
	maxDeleted = 1024
)

// watchHold puts the hold of key, created at revision rev on session s,
// under the watch of its directory, and returns its entry.
func (b *backend) watchHold(s *session, key string, rev int64, loss *driver.Loss) *holdWatch {
	h := &holdWatch{key: key, rev: rev, loss: loss}
	if s.ended() != nil {
		return h // the session fires the loss; there is nothing to watch
	}
	dir := key[:strings.LastIndexByte(key, '/')+1]
	b.watchMu.Lock()
	dw := b.dirs[dir]
	if dw != nil {
		dw.mu.Lock()
		if dw.done || dw.s != s {
			dw.mu.Unlock()
			dw = nil
		}
	}
	if dw == nil {
		dw = b.newDirWatch(s, dir)
		b.dirs[dir] = dw
		dw.mu.Lock()
	}
	b.watchMu.Unlock()
	h.dw = dw
	read := dw.add(h)
	dw.mu.Unlock()
	if read {
		dw.check([]*holdWatch{h})
	}
	return h
}

func (b *backend) newDirWatch(s *session, dir string) *dirWatch {
	ctx, cancel := context.WithCancel(b.bgCtx)
	dw := &dirWatch{b: b, s: s, dir: dir, stop: cancel, holds: map[string][]*holdWatch{}, deleted: map[string]int64{}}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		dw.run(ctx)
	}()
	return dw
}

// add enters h, under mu; it fires h's loss at once if its key's delete
// has already gone by, and reports whether the key must be read instead.
func (dw *dirWatch) add(h *holdWatch) (read bool) {
	dw.holds[h.key] = append(dw.holds[h.key], h)
	dw.n++
	if dw.idle != nil {
		dw.idle.Stop()
	}
	switch {
	case !dw.synced:
		return false // checked when the watch is up
	case h.rev < dw.floor:
		return true
	case dw.deleted[h.key] > h.rev:
		h.loss.Fire(errRemoved)
	}
	return false
}

// release takes the hold out of the watch; the hold's own delete follows.
func (h *holdWatch) release() {
	h.released.Store(true)
	dw := h.dw
	if dw == nil {
		return
	}
	dw.mu.Lock()
	defer dw.mu.Unlock()
	hs := dw.holds[h.key]
	for i, x := range hs {
		if x == h {
			hs = append(hs[:i], hs[i+1:]...)
			dw.n--
			break
		}
	}
	if len(hs) == 0 {
		delete(dw.holds, h.key)
	} else {
		dw.holds[h.key] = hs
	}
	if dw.n == 0 && !dw.done {
		if dw.idle == nil {
			dw.idle = time.AfterFunc(watchLinger, dw.expire)
		} else {
			dw.idle.Reset(watchLinger)
		}
	}
}

// expire ends the watch if it still has no hold.
func (dw *dirWatch) expire() {
	dw.b.watchMu.Lock()
	defer dw.b.watchMu.Unlock()
	dw.mu.Lock()
	defer dw.mu.Unlock()
	if dw.n == 0 && !dw.done {
		dw.end()
	}
}

// end marks dw ended, under watchMu and mu.
func (dw *dirWatch) end() {
	dw.done = true
	if dw.b.dirs[dw.dir] == dw {
		delete(dw.b.dirs, dw.dir)
	}
	if dw.idle != nil {
		dw.idle.Stop()
	}
	dw.stop()
}

// pass makes to the loss that fires from now on in place of from, for a
// hold passed to another handle of the Backend (the key stays, and so does
// the watch). It reports false, changing nothing, when the hold was given
// back or from has fired.
func (h *holdWatch) pass(s *session, from, to *driver.Loss) bool {
	if h.dw == nil {
		return false
	}
	h.dw.mu.Lock()
	defer h.dw.mu.Unlock()
	if h.released.Load() || h.loss != from || from.Err() != nil || !s.pass(from, to) {
		return false
	}
	h.loss = to
	return true
}

// holdStream puts the watches of holds on a gRPC stream of their own: the
// client sets up one watch of a stream at a time, so a waiter's watch would
// otherwise wait behind the setup of holds' watches.
func holdStream(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "baton-watch", "holds")
}

// run watches the directory until ctx ends or the session does; a watch
// that breaks is set up again.
func (dw *dirWatch) run(ctx context.Context) {
	defer func() {
		dw.b.watchMu.Lock()
		dw.mu.Lock()
		dw.end()
		dw.mu.Unlock()
		dw.b.watchMu.Unlock()
	}()
	for attempt := 0; ; attempt++ {
		wctx, wcancel := context.WithCancel(holdStream(ctx))
		dw.mu.Lock()
		dw.cancel = wcancel
		dw.mu.Unlock()
		wch := dw.b.c.Watch(wctx, dw.dir, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
		over, up := dw.follow(ctx, wch)
		wcancel()
		dw.mu.Lock()
		dw.synced = false
		dw.mu.Unlock()
		if over {
			return
		}
		if up {
			attempt = 0
		}
		if backoff(ctx, dw.s, attempt) != nil {
			return
		}
	}
}

// follow reads one watch; over is true when ctx or the session ended, false
// when the watch broke (up: after it was set up).
func (dw *dirWatch) follow(ctx context.Context, wch clientv3.WatchChan) (over, up bool) {
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return true, up
		case <-dw.s.done:
			return true, up
		case wr, ok = <-wch:
		}
		if !ok || wr.Canceled || wr.Err() != nil {
			return ctx.Err() != nil, up
		}
		if wr.Created {
			up = true
			dw.check(dw.sync(wr.Header.Revision))
			continue
		}
		dw.dispatch(wr.Events)
	}
}

// sync notes a watch up from revision rev on, and returns the holds whose
// key must be read: those created before rev (the watch may have missed
// their delete).
func (dw *dirWatch) sync(rev int64) []*holdWatch {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	dw.synced, dw.floor = true, rev
	clear(dw.deleted)
	var old []*holdWatch
	for _, hs := range dw.holds {
		for _, h := range hs {
			if h.rev < rev {
				old = append(old, h)
			}
		}
	}
	return old
}

// dispatch fires the loss of the holds whose key a delete took.
func (dw *dirWatch) dispatch(evs []*clientv3.Event) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	for _, ev := range evs {
		if ev.Type != mvccpb.DELETE {
			continue
		}
		k, rev := string(ev.Kv.Key), ev.Kv.ModRevision
		if len(dw.deleted) >= maxDeleted {
			clear(dw.deleted)
			dw.floor = rev
		}
		dw.deleted[k] = max(dw.deleted[k], rev)
		// A member behind the one that answered a hold's write sends
		// older deletes too: with key ids reused per handle, the previous
		// hold's of this very key. What happened up to the hold's write
		// is not a loss.
		for _, h := range dw.holds[k] {
			if rev > h.rev && !h.released.Load() {
				h.loss.Fire(errRemoved)
			}
		}
	}
}

// check reads the keys of hs, in the background, and fires the loss of
// each hold whose key is gone or was written again since its grant.
func (dw *dirWatch) check(hs []*holdWatch) {
	if len(hs) == 0 {
		return
	}
	b := dw.b
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		for _, h := range hs {
			for attempt := 0; !h.released.Load(); attempt++ {
				rctx, cancel := b.rctx(b.bgCtx)
				resp, err := b.c.Get(rctx, h.key, clientv3.WithKeysOnly())
				cancel()
				if err == nil {
					if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev {
						dw.mu.Lock()
						if !h.released.Load() {
							h.loss.Fire(errRemoved)
						}
						dw.mu.Unlock()
					}
					break
				}
				if backoff(b.bgCtx, dw.s, attempt) != nil {
					return
				}
			}
		}
	}()
}
