package etcdlock

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// errWatch reports that a watch broke (no leader, member gone); the caller
// waits a little and reads again.
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
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := b.c.Watch(wctx, key, clientv3.WithCreatedNotify())
	for {
		wr, err := nextWatch(ctx, s, wch)
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

// nextWatch returns the next response of wch, or the error that ends the
// wait: ctx done, the session lost, or the watch broken (errWatch).
func nextWatch(ctx context.Context, s *session, wch clientv3.WatchChan) (clientv3.WatchResponse, error) {
	select {
	case <-ctx.Done():
		return clientv3.WatchResponse{}, ctx.Err()
	case <-s.done:
		return clientv3.WatchResponse{}, s.lostErr()
	case wr, ok := <-wch:
		if !ok {
			if err := ctx.Err(); err != nil {
				return wr, err
			}
			return wr, errWatch
		}
		if wr.Err() != nil || wr.Canceled {
			return wr, errWatch
		}
		return wr, nil
	}
}
