package zklock

import (
	"context"
	"errors"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// A Value is the persistent node P/value/<n>: its data is the value's, and
// its version is the node's modification zxid (Mzxid), which every write
// of the ensemble moves past every earlier one, also when the node is
// removed and made again; the node's own version (a count from 0 that
// restarts with the node) is what a write checks, by Set with that version.
// A handle remembers the node version that went with the last Mzxid it saw,
// so a CompareAndSwap against it is one request; against another, it reads
// the node first. Wait is a data watch (an exists watch while there is no
// node).
//
// The package never removes a value's node. A node removed by hand and
// made again counts its node version from 0 again, so a handle that
// remembered the old node could write over the new one by a CompareAndSwap
// against a version of the old: remove a value's node only while no handle
// of it is open.
//
// Reads are served by the connected server, which may trail the leader (as
// every ZooKeeper read): a Load can miss a write that another client has
// already seen. A CompareAndSwap against a version newer than the server
// shows syncs the server with the leader before it decides.

type valueDriver struct {
	b    *backend
	path string

	mu      sync.Mutex
	seen    int64           // guarded by mu: an Mzxid the handle saw
	seenVer int32           // guarded by mu: the node version that went with it
	watch   <-chan zk.Event // guarded by mu: the handle's watch, while it has not fired
}

func (b *backend) OpenValue(_ context.Context, name string) (driver.Value, error) {
	return &valueDriver{b: b, path: b.dir(baton.KindValue, name)}, nil
}

func (v *valueDriver) remember(st *zk.Stat) {
	v.mu.Lock()
	v.seen, v.seenVer = st.Mzxid, st.Version
	v.mu.Unlock()
}

// known returns the node version of Mzxid m if the handle saw it.
func (v *valueDriver) known(m int64) (int32, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seenVer, v.seen == m && m != 0
}

type valueRead struct {
	data []byte
	st   *zk.Stat
}

// get reads the node; a missing node is version 0 and nil data.
func (v *valueDriver) get(ctx context.Context) ([]byte, uint64, *zk.Stat, error) {
	r, err := req(v.b, ctx, func() (valueRead, error) {
		d, st, err := v.b.c.Get(v.path)
		return valueRead{d, st}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, 0, nil, nil
	}
	if err != nil {
		return nil, 0, nil, lease.CtxErr(ctx, err)
	}
	v.remember(r.st)
	if r.data == nil {
		r.data = []byte{}
	}
	return r.data, uint64(r.st.Mzxid), r.st, nil
}

func (v *valueDriver) Load(ctx context.Context) ([]byte, uint64, error) {
	data, ver, _, err := v.get(ctx)
	return data, ver, err
}

func (v *valueDriver) CompareAndSwap(ctx context.Context, old uint64, data []byte) (uint64, error) {
	if data == nil {
		data = []byte{}
	}
	if old == 0 {
		return v.create(ctx, data)
	}
	if old > 1<<63-1 {
		return v.conflict(ctx)
	}
	nodeVer, ok := v.known(int64(old))
	if !ok {
		_, now, st, err := v.get(ctx)
		if err != nil {
			return 0, err
		}
		if now < old {
			// The server may trail the write that made old.
			if _, err := req(v.b, ctx, func() (string, error) { return v.b.c.Sync(v.path) }); err != nil {
				return 0, lease.CtxErr(ctx, err)
			}
			if _, now, st, err = v.get(ctx); err != nil {
				return 0, err
			}
		}
		if now != old {
			return now, baton.ErrConflict
		}
		nodeVer = st.Version
	}
	st, err := req(v.b, ctx, func() (*zk.Stat, error) { return v.b.c.Set(v.path, data, nodeVer) })
	if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
		return v.conflict(ctx)
	}
	if err != nil {
		return 0, lease.CtxErr(ctx, err)
	}
	v.remember(st)
	return uint64(st.Mzxid), nil
}

// create makes the node; the Set of the same data in the same transaction
// is there for its reply, whose stat names the transaction's zxid.
func (v *valueDriver) create(ctx context.Context, data []byte) (uint64, error) {
	for range 2 {
		res, err := req(v.b, ctx, func() ([]zk.MultiResponse, error) {
			return v.b.c.Multi(
				&zk.CreateRequest{Path: v.path, Data: data, Acl: v.b.acl},
				&zk.SetDataRequest{Path: v.path, Data: data, Version: 0},
			)
		})
		switch {
		case err == nil:
			v.remember(res[1].Stat)
			return uint64(res[1].Stat.Mzxid), nil
		case errors.Is(err, zk.ErrNodeExists):
			return v.conflict(ctx)
		case !errors.Is(err, zk.ErrNoNode):
			return 0, lease.CtxErr(ctx, err)
		}
		if _, err := req(v.b, ctx, func() (struct{}, error) {
			return struct{}{}, v.b.ensure(v.b.o.Prefix+"/"+string(baton.KindValue), nil)
		}); err != nil {
			return 0, lease.CtxErr(ctx, err)
		}
	}
	return 0, zk.ErrNoNode
}

// conflict reads the version that refused a write. The server that
// answered the refusal has applied the write that caused it.
func (v *valueDriver) conflict(ctx context.Context) (uint64, error) {
	_, now, _, err := v.get(ctx)
	if err != nil {
		return 0, err
	}
	return now, baton.ErrConflict
}

type valueWatch struct {
	data []byte
	st   *zk.Stat
	ev   <-chan zk.Event
}

// Wait reads the node after a watch on it was set (in the same request
// or before), so a write after the read fires the watch. The client keeps
// every watch it set until it fires, so the Waits of a handle share one:
// while it has not fired, a Wait only reads, and Waits that end by their
// context leave nothing behind. A watch also fires when the session
// expires; one set before a disconnection is set again on the next
// connection. The loop then reads again.
func (v *valueDriver) Wait(ctx context.Context, ver uint64) ([]byte, uint64, error) {
	for attempt := 0; ; attempt++ {
		w, err := call(v.b, ctx, v.watchRead)
		switch {
		case errors.Is(err, errRetry):
			continue
		case err != nil && transient(err):
			if err := v.b.backoff(ctx, nil, attempt); err != nil {
				return nil, 0, err
			}
			continue
		case err != nil:
			return nil, 0, lease.CtxErr(ctx, err)
		}
		attempt = 0
		var now uint64
		if w.st != nil {
			v.remember(w.st)
			now = uint64(w.st.Mzxid)
			if w.data == nil {
				w.data = []byte{}
			}
		}
		if now != ver {
			return w.data, now, nil
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-v.b.stop:
			return nil, 0, baton.ErrClosed
		case <-w.ev:
		}
	}
}

var errRetry = errors.New("read again")

// watchRead reads the node under the handle's pending watch, or sets a new
// one with the read.
func (v *valueDriver) watchRead() (valueWatch, error) {
	v.mu.Lock()
	ev := v.watch
	v.mu.Unlock()
	if ev != nil {
		select {
		case <-ev:
			ev = nil // fired (or was closed): set a new one
		default:
			d, st, err := v.b.c.Get(v.path)
			if errors.Is(err, zk.ErrNoNode) {
				return valueWatch{ev: ev}, nil
			}
			return valueWatch{d, st, ev}, err
		}
	}
	d, st, ev, err := v.b.c.GetW(v.path)
	if errors.Is(err, zk.ErrNoNode) {
		var ok bool
		ok, st, ev, err = v.b.c.ExistsW(v.path)
		if err == nil && ok {
			v.keep(ev)
			return valueWatch{}, errRetry // made meanwhile: read it under that watch
		}
		st = nil
	}
	if err == nil {
		v.keep(ev)
	}
	return valueWatch{d, st, ev}, err
}

func (v *valueDriver) keep(ev <-chan zk.Event) {
	v.mu.Lock()
	v.watch = ev
	v.mu.Unlock()
}

func (v *valueDriver) Close() error { return nil }

var _ driver.ValueOpener = (*backend)(nil)
