package etcdlock

import (
	"context"
	"errors"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// errWatch reports that a watch broke (no leader, member gone, or a member
// that stopped answering); the caller waits a little and reads again.
var errWatch = errors.New("watch interrupted")

// waitChange waits until key, read at revision rev with create revision
// createRev, is deleted or rewritten. It returns nil when it may have
// changed (the caller reads again), an error matching ctx.Err() when ctx is
// done, the session's loss when the session ends, or errWatch.
//
// Why the watch starts at the current revision and not at rev+1: etcd serves
// a watch that starts at an old revision from its "unsynced" group, which it
// catches up only every 100 ms, so such a waiter would learn of a release up
// to 100 ms late. A watch from the current revision is in sync at once. The
// revision the server reports when the watch is created tells whether
// anything happened since rev; only then is the key read again, on the same
// watch, so that a change between the read and the watch is not missed.
func (b *backend) waitChange(ctx context.Context, s *session, key string, createRev, rev int64) error {
	w := b.watch(ctx, key)
	defer w.stop()
	for {
		wr, err := w.next(ctx, s)
		if err != nil {
			return err
		}
		if wr.Created {
			if wr.Header.Revision <= rev {
				continue // nothing happened since the read
			}
			rctx, rcancel := b.rctx(ctx)
			resp, err := b.c.Get(rctx, key, clientv3.WithKeysOnly())
			rcancel()
			if err != nil {
				return nil // read again, with retries, in the caller
			}
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != createRev || resp.Kvs[0].ModRevision > rev {
				return nil
			}
			rev = resp.Header.Revision
			continue
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision > rev {
				return nil
			}
		}
	}
}

// waiterWatch is a waiter's watch, checked for life while it is silent.
//
// A watch says nothing while nothing changes, and the client keeps a watch
// on its member and retries it there quietly: a member that is killed with
// no other member to move to, or that stops answering (paused, cut off) but
// keeps its connection, leaves the watch silent for good, and its waiter
// would sleep through the release it waits for. So a watch that has been
// silent for a request timeout asks its stream for a progress report,
// which every live member answers at once; if no answer (or anything else)
// comes within another request timeout, the watch is given up (errWatch):
// the waiter reads again through any member, and its next watch opens a
// new stream, which the client can place on another member. The wait still
// sleeps on the watch; the check only costs a message per silent stream
// and request timeout.
type waiterWatch struct {
	b      *backend
	ctx    context.Context // carries the stream's key
	cancel context.CancelFunc
	ch     clientv3.WatchChan
	gen    uint64      // the stream generation it was opened on
	quiet  *time.Timer // fires after a request timeout of silence
	asked  bool        // a progress report was asked for since the last response
}

// watch watches key from the current revision, with a created notice, on
// the waiters' current stream, with WithRequireLeader: a member that loses
// its leader ends the watch instead of keeping it silent.
func (b *backend) watch(ctx context.Context, key string, opts ...clientv3.OpOption) *waiterWatch {
	gen := b.watchGen.Load()
	// The client groups watches into streams by the context's metadata.
	sctx := metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "baton-watch", "wait-"+strconv.FormatUint(gen, 10))
	wctx, cancel := context.WithCancel(sctx)
	w := &waiterWatch{b: b, ctx: wctx, cancel: cancel, gen: gen}
	// Watch returns only when the server has confirmed the watch (or ctx
	// ends): bound that by the request timeout too. A watch cancelled this
	// way has a closed channel, which next reports as errWatch.
	t := time.AfterFunc(b.o.requestTimeout, cancel)
	w.ch = b.c.Watch(wctx, key, append(opts, clientv3.WithCreatedNotify())...)
	t.Stop()
	w.quiet = time.NewTimer(b.o.requestTimeout)
	return w
}

func (w *waiterWatch) stop() {
	w.quiet.Stop()
	w.cancel()
}

// next returns the next response of the watch that is not a progress
// report, or the error that ends the wait: ctx done, the session s lost
// (s may be nil: a Value's watch has no session), or the watch broken or
// silent (errWatch).
func (w *waiterWatch) next(ctx context.Context, s *session) (clientv3.WatchResponse, error) {
	var lost <-chan struct{}
	if s != nil {
		lost = s.done
	}
	for {
		select {
		case <-ctx.Done():
			return clientv3.WatchResponse{}, ctx.Err()
		case <-lost:
			return clientv3.WatchResponse{}, s.lostErr()
		case wr, ok := <-w.ch:
			if !ok {
				if err := ctx.Err(); err != nil {
					return wr, err
				}
				return wr, w.broken()
			}
			if wr.Err() != nil || wr.Canceled {
				return wr, w.broken()
			}
			w.asked = false
			w.quiet.Reset(w.b.o.requestTimeout)
			if wr.IsProgressNotify() {
				continue
			}
			return wr, nil
		case <-w.quiet.C:
			if w.asked {
				return clientv3.WatchResponse{}, w.broken()
			}
			w.asked = true
			// RequestProgress waits for the stream to take the request,
			// which a stream stuck reconnecting never does.
			rctx, cancel := context.WithTimeout(w.ctx, w.b.o.requestTimeout)
			err := w.b.c.RequestProgress(rctx)
			cancel()
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return clientv3.WatchResponse{}, cerr
				}
				return clientv3.WatchResponse{}, w.broken()
			}
			w.quiet.Reset(w.b.o.requestTimeout)
		}
	}
}

// broken moves later watches to a new stream when this one's stream may be
// stuck on a member that does not answer (other watches on it find out for
// themselves), and returns errWatch.
func (w *waiterWatch) broken() error {
	if w.asked || w.ctx.Err() != nil {
		w.b.watchGen.CompareAndSwap(w.gen, w.gen+1)
	}
	return errWatch
}
