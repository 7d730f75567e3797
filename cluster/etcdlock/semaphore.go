package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// semDriver is one handle's connection to a Semaphore name.
type semDriver struct {
	b        *backend
	name     string
	meta     string // the capacity key
	queue    string // directory of the acquisitions' keys, ending in '/'
	capacity int64
	ids      ids
}

// semGrant is the driver's state of one acquisition.
type semGrant struct {
	s    *session
	id   string
	key  string
	rev  int64
	loss *driver.Loss
	hw   *holdWatch // fires loss when key is deleted by someone else
}

// OpenSemaphore records the capacity when the name is new and checks it
// otherwise, in one transaction.
func (b *backend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	dir := b.dir(baton.KindSemaphore, name)
	d := &semDriver{b: b, name: name, meta: strings.TrimSuffix(dir, "/"), queue: dir + "q/", capacity: permits}
	rctx, cancel := b.rctx(ctx)
	defer cancel()
	resp, err := b.c.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(d.meta), "=", 0)).
		Then(clientv3.OpPut(d.meta, strconv.FormatInt(permits, 10))).
		Else(clientv3.OpGet(d.meta)).
		Commit()
	if err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil, errors.New("capacity key vanished")
		}
		have, perr := strconv.ParseInt(string(kvs[0].Value), 10, 64)
		if perr != nil || have != permits {
			return nil, fmt.Errorf("%w: capacity %q recorded, %d asked", baton.ErrMismatch, kvs[0].Value, permits)
		}
	}
	return d, nil
}

func (d *semDriver) Capacity() int64 { return d.capacity }

// weight is the number of permits a key stands for. A value that cannot be
// read counts as the whole capacity, so that it can never let too many in.
func (d *semDriver) weight(v []byte) int64 {
	if n := parseHolder(v).N; n > 0 {
		return n
	}
	return d.capacity
}

func (d *semDriver) enqueue(ctx context.Context, s *session, n int64) (id, key string, rev int64, older map[string]int64, err error) {
	id = d.ids.get(s)
	key = d.queue + id
	// The transaction may run on after a cancelled caller has returned (and
	// overwritten the results): it must not read them.
	put := clientv3.OpPut(key, d.b.holderValue("", n), clientv3.WithLease(s.id))
	resp, err := d.b.commit(ctx, s, []string{key}, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return d.b.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(d.meta), ">", 0)).
			Then(put, clientv3.OpGet(d.queue, clientv3.WithPrefix())).
			Commit()
	})
	if err != nil {
		return "", "", 0, nil, err
	}
	if !resp.Succeeded {
		d.ids.put(s, id)
		return "", "", 0, nil, fmt.Errorf("%w: the semaphore was removed", baton.ErrLost)
	}
	rev = resp.Header.Revision
	return id, key, rev, d.older(resp.Responses[1].GetResponseRange().Kvs, rev), nil
}

// older maps the keys older than rev to their weights.
func (d *semDriver) older(kvs []*mvccpb.KeyValue, rev int64) map[string]int64 {
	m := make(map[string]int64, len(kvs))
	for _, kv := range kvs {
		if kv.CreateRevision < rev {
			m[string(kv.Key)] = d.weight(kv.Value)
		}
	}
	return m
}

func sum(m map[string]int64) int64 {
	var t int64
	for _, w := range m {
		t += w
	}
	return t
}

// drop deletes the key of an acquisition that will not be used.
func (d *semDriver) drop(s *session, id, key string) {
	if d.b.cleanup(s, key) {
		d.ids.put(s, id)
	}
}

func (d *semDriver) grant(s *session, id, key string, rev, n int64) driver.Grant {
	loss := driver.NewLoss()
	s.track(loss, key, rev)
	return driver.Grant{Token: uint64(rev), Loss: loss, N: n, Data: &semGrant{s: s, id: id, key: key, rev: rev, loss: loss, hw: d.b.watchHold(s, key, rev, loss)}}
}

func (d *semDriver) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	return d.acquire(ctx, n, true)
}

func (d *semDriver) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	return d.acquire(ctx, n, false)
}

// acquire enqueues a key for n permits. Acquire (wait) then waits until the
// permits of all keys up to its own fit in the capacity, and tries a failed
// write again; TryAcquire keeps the key only if they fit at once.
func (d *semDriver) acquire(ctx context.Context, n int64, wait bool) (driver.Grant, error) {
	for attempt := 0; ; attempt++ {
		s, err := d.b.session(ctx)
		if err != nil {
			return driver.Grant{}, err
		}
		id, key, rev, older, err := d.enqueue(ctx, s, n)
		if err != nil {
			if err := again(ctx, s, wait, attempt, err); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		switch {
		case wait:
			err = d.wait(ctx, s, key, rev, n, older, rev)
		case sum(older)+n > d.capacity:
			err = baton.ErrLocked
		}
		if err != nil {
			d.drop(s, id, key)
			return driver.Grant{}, err
		}
		return d.grant(s, id, key, rev, n), nil
	}
}

// wait keeps the permits of the keys older than the caller's from the
// events of a watch on the directory, and returns when they leave room for
// n. Only deletions and rewrites of older keys change the sum; newer keys
// never count.
func (d *semDriver) wait(ctx context.Context, s *session, key string, rev, n int64, older map[string]int64, read int64) error {
	mine := clientv3.Compare(clientv3.CreateRevision(key), "=", rev)
	get := clientv3.OpGet(d.queue, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(rev-1))
	for attempt := 0; ; attempt++ {
		if sum(older)+n <= d.capacity {
			return s.lostErr()
		}
		err := d.watch(ctx, s, key, rev, n, older, &read)
		if err == nil {
			return s.lostErr()
		}
		if !errors.Is(err, errWatch) && !transient(err) {
			return err
		}
		if err := backoff(ctx, s, attempt); err != nil {
			return err
		}
		// Read the state again before the next watch.
		rctx, cancel := d.b.rctx(ctx)
		resp, rerr := d.b.c.Txn(rctx).If(mine).Then(get).Commit()
		cancel()
		if rerr != nil {
			continue
		}
		if !resp.Succeeded {
			return fmt.Errorf("%w: the waiter's key is gone (lease expired or key removed)", baton.ErrLost)
		}
		older = d.older(resp.Responses[0].GetResponseRange().Kvs, rev)
		read = resp.Header.Revision
	}
}

// watch follows the directory from the current revision until the older
// keys leave room for n (nil), or fails. See waitChange for why it does
// not start at *read+1.
func (d *semDriver) watch(ctx context.Context, s *session, key string, rev, n int64, older map[string]int64, read *int64) error {
	w := d.b.watch(ctx, d.queue, clientv3.WithPrefix())
	defer w.stop()
	for {
		wr, err := w.next(ctx, s)
		if err != nil {
			return err
		}
		if wr.Created {
			if wr.Header.Revision <= *read {
				continue
			}
			rctx, rcancel := d.b.rctx(ctx)
			resp, err := d.b.c.Txn(rctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
				Then(clientv3.OpGet(d.queue, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(rev-1))).
				Commit()
			rcancel()
			if err != nil {
				return err
			}
			if !resp.Succeeded {
				return fmt.Errorf("%w: the waiter's key is gone (lease expired or key removed)", baton.ErrLost)
			}
			clear(older)
			for k, w := range d.older(resp.Responses[0].GetResponseRange().Kvs, rev) {
				older[k] = w
			}
			*read = resp.Header.Revision
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision <= *read {
				continue
			}
			k := string(ev.Kv.Key)
			switch {
			case k == key && ev.Type == mvccpb.DELETE:
				return fmt.Errorf("%w: the waiter's key is gone (lease expired or key removed)", baton.ErrLost)
			case ev.Type == mvccpb.DELETE:
				delete(older, k)
			default:
				if _, ok := older[k]; ok {
					older[k] = d.weight(ev.Kv.Value)
				}
			}
			*read = ev.Kv.ModRevision
		}
		if sum(older)+n <= d.capacity {
			return nil
		}
	}
}

// Release gives back n permits of g: it deletes the key when n is all of
// them, and otherwise rewrites it with the rest, keeping its place.
func (d *semDriver) Release(ctx context.Context, g driver.Grant, n int64) error {
	sg, err := driver.DataOf[semGrant](g)
	if err != nil {
		return err
	}
	op := clientv3.OpDelete(sg.key)
	if n < g.N {
		op = clientv3.OpPut(sg.key, d.b.holderValue("", g.N-n), clientv3.WithLease(sg.s.id))
	} else {
		sg.s.untrack(sg.loss)
		sg.hw.release()
	}
	rctx, cancel := d.b.rctx(ctx)
	resp, err := d.b.c.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(sg.key), "=", sg.rev)).Then(op).Commit()
	cancel()
	switch {
	case err != nil:
		if n >= g.N {
			d.b.cleanup(sg.s, sg.key)
		}
		return err
	case !resp.Succeeded:
		sg.s.untrack(sg.loss)
		sg.hw.release()
		sg.loss.Fire(errHoldGone)
		return sg.loss.Err()
	}
	if n >= g.N {
		d.ids.put(sg.s, sg.id)
	}
	if lerr := sg.loss.Err(); lerr != nil {
		return lerr
	}
	return nil
}

func (d *semDriver) Close() error { return nil }

var _ driver.Semaphore = (*semDriver)(nil)
