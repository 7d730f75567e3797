package etcdlock

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// Versioned values (baton.Value): one key per name, P value/<n>/v, with no
// lease. Its version is the key's mod revision, which etcd raises with
// every write and keeps across restarts; CompareAndSwap is one Txn on it,
// and Wait a watch of the key.

var _ driver.ValueOpener = (*backend)(nil)

type valueDriver struct {
	b   *backend
	key string
}

// OpenValue opens a versioned value (driver.ValueOpener).
func (b *backend) OpenValue(ctx context.Context, name string) (driver.Value, error) {
	if b.closed.Load() {
		return nil, baton.ErrClosed
	}
	return &valueDriver{b: b, key: b.dir(baton.KindValue, name) + "v"}, nil
}

func (v *valueDriver) Load(ctx context.Context) ([]byte, uint64, error) {
	rctx, cancel := v.b.rctx(ctx)
	defer cancel()
	resp, err := v.b.c.Get(rctx, v.key)
	if err != nil {
		return nil, 0, lease.CtxErr(ctx, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	kv := resp.Kvs[0]
	return kv.Value, uint64(kv.ModRevision), nil
}

func (v *valueDriver) CompareAndSwap(ctx context.Context, old uint64, data []byte) (uint64, error) {
	rctx, cancel := v.b.rctx(ctx)
	defer cancel()
	// A key that does not exist compares as mod revision 0.
	resp, err := v.b.c.Txn(rctx).
		If(clientv3.Compare(clientv3.ModRevision(v.key), "=", int64(old))).
		Then(clientv3.OpPut(v.key, string(data))).
		Else(clientv3.OpGet(v.key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, lease.CtxErr(ctx, err)
	}
	if resp.Succeeded {
		return uint64(resp.Header.Revision), nil
	}
	var now uint64
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		now = uint64(kvs[0].ModRevision)
	}
	return now, baton.ErrConflict
}

// Wait watches the key from the current revision (in sync at once, see
// waitChange), reads it once the watch is created, and returns on the
// first event after that read. A broken watch (see waiterWatch) is
// followed by a read, and started again.
func (v *valueDriver) Wait(ctx context.Context, ver uint64) ([]byte, uint64, error) {
	for {
		data, now, changed, err := v.waitOnce(ctx, ver)
		if err == nil && !changed {
			err = ctx.Err()
			if err == nil {
				// The watch broke: no leader, or the member went away.
				t := time.NewTimer(50 * time.Millisecond)
				select {
				case <-ctx.Done():
					err = ctx.Err()
				case <-t.C:
				}
				t.Stop()
			}
		}
		if err != nil || changed {
			return data, now, err
		}
	}
}

// waitOnce reports changed false, with no error, when the watch broke
// and a read since shows no change.
func (v *valueDriver) waitOnce(ctx context.Context, ver uint64) (data []byte, now uint64, changed bool, err error) {
	w := v.b.watch(ctx, v.key)
	defer w.stop()
	var rev int64 = -1 // the revision of the read; -1 before the watch is created
	for {
		wr, err := w.next(ctx, nil)
		switch {
		case errors.Is(err, errWatch):
			// The change may have come while the watch was broken,
			// or the watch may not have been created at all.
			data, now, changed, _, err := v.read(ctx, ver)
			if err != nil {
				return nil, 0, false, nil
			}
			return data, now, changed, nil
		case err != nil:
			return nil, 0, false, err
		}
		if wr.Created {
			data, now, changed, r, err := v.read(ctx, ver)
			if err != nil || changed {
				return data, now, changed, err
			}
			rev = r
			continue
		}
		if rev < 0 {
			continue
		}
		for i := len(wr.Events) - 1; i >= 0; i-- {
			ev := wr.Events[i]
			if ev.Kv.ModRevision <= rev {
				continue
			}
			if ev.Type == clientv3.EventTypeDelete {
				return nil, 0, true, nil
			}
			return ev.Kv.Value, uint64(ev.Kv.ModRevision), true, nil
		}
	}
}

// read reads the key, which changed if its version is not ver; rev is
// the revision of the read.
func (v *valueDriver) read(ctx context.Context, ver uint64) (data []byte, now uint64, changed bool, rev int64, err error) {
	rctx, cancel := v.b.rctx(ctx)
	resp, err := v.b.c.Get(rctx, v.key)
	cancel()
	if err != nil {
		return nil, 0, false, 0, lease.CtxErr(ctx, err)
	}
	rev = resp.Header.Revision
	if len(resp.Kvs) == 0 {
		return nil, 0, ver != 0, rev, nil
	}
	if kv := resp.Kvs[0]; uint64(kv.ModRevision) != ver {
		return kv.Value, uint64(kv.ModRevision), true, rev, nil
	}
	return nil, 0, false, rev, nil
}

func (v *valueDriver) Close() error { return nil }
