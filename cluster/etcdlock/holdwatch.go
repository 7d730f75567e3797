package etcdlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// Causes of a hold's loss: errRemoved when the hold's watch (or a Remove
// through its own Backend) saw its key deleted by someone else (Inspector's
// Remove, `baton rm`, or any etcd client), errHoldGone when Unlock or
// Downgrade found the key gone.
var (
	errRemoved  = errors.New("the hold's key was deleted by someone else")
	errHoldGone = errors.New("the hold's key is gone")
)

// holdWatch watches the key of one hold and fires the hold's loss when the
// key is deleted while the hold still has it. The lease keeps the key only
// while the session lives; a delete by anyone else would otherwise go
// unnoticed until Unlock.
//
// The watch is set up by a goroutine of its own, so Lock does not wait for
// it: creating a watch waits for the server's answer. It watches from the
// current revision, which etcd serves at once, rather than from the grant's
// revision, which it would serve from its catch-up group up to 100 ms late;
// when the server reports that something was written since the grant, the
// key is read once to close that gap.
//
// Ordering: the delete event reaches this watch when it reaches the watch of
// the next waiter, which still needs a read before it holds; so the loss
// normally fires about one round trip before another client can be granted
// the name. It cannot be ordered before the return of a Remove made in
// another process; a Remove through the holder's own Backend fires the loss
// itself before returning (session.removed).
type holdWatch struct {
	stop     context.CancelFunc
	released atomic.Bool // set by Release before its own delete is sent

	mu   sync.Mutex
	loss *driver.Loss // guarded by mu: the loss of the hold that has the key now
}

// watchHold starts watching key, created at revision rev, for a hold whose
// loss is loss.
func (b *backend) watchHold(s *session, key string, rev int64, loss *driver.Loss) *holdWatch {
	ctx, cancel := context.WithCancel(b.bgCtx)
	w := &holdWatch{stop: cancel, loss: loss}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		defer cancel()
		if b.watchKey(ctx, s, key, rev, w) {
			// Under mu, so that a pass either comes first and its loss
			// fires, or sees the old one fired and refuses.
			w.mu.Lock()
			w.loss.Fire(errRemoved)
			w.mu.Unlock()
		}
	}()
	return w
}

// pass makes to the loss that fires from now on in place of from, for a
// hold passed to another handle of the Backend (the key stays, and so does
// the watch). It reports false, changing nothing, when the hold was given
// back or from has fired.
func (w *holdWatch) pass(s *session, from, to *driver.Loss) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released.Load() || w.loss != from || from.Err() != nil || !s.pass(from, to) {
		return false
	}
	w.loss = to
	return true
}

// holdStream puts the watches of holds on a gRPC stream of their own: the
// client sets up one watch of a stream at a time, so a waiter's watch would
// otherwise wait behind the setup of holds' watches.
func holdStream(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "baton-watch", "holds")
}

// release stops the watch; the hold's own delete follows.
func (w *holdWatch) release() {
	w.released.Store(true)
	w.stop()
}

// watchKey returns true when key has been deleted (or replaced) while the
// hold has it, false when the watch is stopped or the session ends.
func (b *backend) watchKey(ctx context.Context, s *session, key string, rev int64, w *holdWatch) bool {
	known := rev // the key was the hold's at this revision
	gone := func(kv *mvccpb.KeyValue, deleted bool) bool {
		return !w.released.Load() && (deleted || kv.CreateRevision != rev)
	}
	for attempt := 0; ; attempt++ {
		wctx, wcancel := context.WithCancel(holdStream(ctx))
		wch := b.c.Watch(wctx, key, clientv3.WithCreatedNotify())
		lost, ok := b.followKey(ctx, s, key, wch, &known, gone)
		wcancel()
		if ok {
			return lost
		}
		if backoff(ctx, s, attempt) != nil {
			return false
		}
	}
}

// followKey reads one watch of key; ok is false when the watch broke and
// must be set up again (known is then the last revision checked).
func (b *backend) followKey(ctx context.Context, s *session, key string, wch clientv3.WatchChan, known *int64, gone func(*mvccpb.KeyValue, bool) bool) (lost, ok bool) {
	for {
		var wr clientv3.WatchResponse
		select {
		case <-ctx.Done():
			return false, true
		case <-s.done:
			return false, true
		case wr, ok = <-wch:
		}
		if !ok || wr.Canceled || wr.Err() != nil {
			return false, ctx.Err() != nil
		}
		if wr.Created {
			if wr.Header.Revision <= *known {
				continue
			}
			rctx, cancel := b.rctx(ctx)
			resp, err := b.c.Get(rctx, key, clientv3.WithKeysOnly())
			cancel()
			if err != nil {
				return false, ctx.Err() != nil
			}
			if len(resp.Kvs) == 0 {
				return gone(nil, true), true
			}
			if gone(resp.Kvs[0], false) {
				return true, true
			}
			*known = resp.Header.Revision
			continue
		}
		for _, ev := range wr.Events {
			// A member behind the one that answered the hold's write
			// starts the watch before it, and first sends older events:
			// with key ids reused per handle, the previous hold's put and
			// delete of this very key. What happened up to known is not
			// news.
			if ev.Kv.ModRevision <= *known {
				continue
			}
			if gone(ev.Kv, ev.Type == mvccpb.DELETE) {
				return true, true
			}
			*known = ev.Kv.ModRevision
		}
	}
}
