package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// lockDriver is one handle's connection to a Mutex or RWMutex name. The core
// calls it one operation at a time and gives it at most one grant at a
// time; it keeps no state between calls besides what the grant carries.
type lockDriver struct {
	b    *backend
	kind baton.Kind
	name string
	dir  string // the name's directory, ending in '/'
	rw   bool
	ids  ids
	// The reads of Acquire's first transaction, by mode: built once, since
	// a clientv3.Op is only read when a transaction is made of it.
	newest [2]clientv3.Op
}

// lockGrant is the driver's state of one hold.
type lockGrant struct {
	s    *session
	id   string // the key id
	q    string // the acquisition's key in the queue
	w    string // its writer marker, "" for mutexes and readers
	rev  int64  // the create revision of q (and w): order and token
	pass uint64 // mutexes: how many times the hold was passed (pass.go)
	loss *driver.Loss
	hw   *holdWatch // fires loss when q is deleted by someone else
}

func (b *backend) OpenMutex(_ context.Context, name string) (driver.Lock, error) {
	d := &mutexDriver{lockDriver{b: b, kind: baton.KindMutex, name: name, dir: b.dir(baton.KindMutex, name)}}
	d.init()
	return d, nil
}

func (b *backend) OpenRWMutex(_ context.Context, name string) (driver.Lock, error) {
	d := &lockDriver{b: b, kind: baton.KindRWMutex, name: name, dir: b.dir(baton.KindRWMutex, name), rw: true}
	d.init()
	return d, nil
}

func (d *lockDriver) init() {
	for _, mode := range []driver.Mode{driver.Exclusive, driver.Shared} {
		// The newest key in the blockers' directory is the caller's own
		// (writers) or older than it (readers): the two newest tell who
		// comes just before.
		d.newest[mode] = clientv3.OpGet(d.blockers(mode), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))
	}
}

// blockers is the directory whose older keys a request of mode waits for:
// every key for a writer, writer markers for a reader.
func (d *lockDriver) blockers(mode driver.Mode) string {
	if mode == driver.Shared {
		return d.dir + "w/"
	}
	return d.dir + "q/"
}

// puts returns the keys and the writes of a new acquisition.
func (d *lockDriver) puts(s *session, mode driver.Mode) (id, q, w string, ops []clientv3.Op) {
	id = d.ids.get(s)
	q = d.dir + "q/" + id
	// Room for the writer marker and Acquire's read, appended after.
	ops = make([]clientv3.Op, 1, 3)
	ops[0] = clientv3.OpPut(q, d.b.holderValue(mode.String(), 0), clientv3.WithLease(s.id))
	if d.rw && mode == driver.Exclusive {
		w = d.dir + "w/" + id
		ops = append(ops, clientv3.OpPut(w, "", clientv3.WithLease(s.id)))
	}
	return id, q, w, ops
}

// drop deletes the keys of an acquisition that will not be used; the id
// is reused only if they are gone for sure.
func (d *lockDriver) drop(s *session, id, q, w string) {
	if d.b.cleanup(s, keysOf(q, w)...) {
		d.ids.put(s, id)
	}
}

func keysOf(q, w string) []string {
	if w == "" {
		return []string{q}
	}
	return []string{q, w}
}

// entry is an acquisition's keys, written at revision rev.
type entry struct {
	s        *session
	id, q, w string
	rev      int64
}

func (d *lockDriver) grant(e entry) driver.Grant {
	loss := driver.NewLoss()
	e.s.track(loss, e.q, e.rev)
	tok := uint64(e.rev)
	if !d.rw {
		tok = mutexToken(e.rev, 0)
	}
	return driver.Grant{
		Token: tok,
		Loss:  loss,
		Data:  &lockGrant{s: e.s, id: e.id, q: e.q, w: e.w, rev: e.rev, loss: loss, hw: d.b.watchHold(e.s, e.q, e.rev, loss)},
	}
}

// enqueue writes the keys of a new acquisition of mode on the current
// session. For Acquire (wait) the transaction also reads the two newest
// blockers, and a transient failure is tried again; for TryAcquire it
// writes only if there is no blocker (resp.Succeeded), and it is tried
// again only once, on a new session, when the server no longer knows the
// lease.
func (d *lockDriver) enqueue(ctx context.Context, mode driver.Mode, wait bool) (entry, *clientv3.TxnResponse, error) {
	for attempt := 0; ; attempt++ {
		s, err := d.b.session(ctx)
		if err != nil {
			return entry{}, nil, err
		}
		e := entry{s: s}
		var ops []clientv3.Op
		e.id, e.q, e.w, ops = d.puts(s, mode)
		if wait {
			ops = append(ops, d.newest[mode])
		}
		resp, err := d.b.commit(ctx, s, keysOf(e.q, e.w), func(ctx context.Context) (*clientv3.TxnResponse, error) {
			txn := d.b.c.Txn(ctx)
			if !wait {
				txn = txn.If(clientv3.Compare(clientv3.CreateRevision(d.blockers(mode)), "=", 0).WithPrefix())
			}
			return txn.Then(ops...).Commit()
		})
		if err == nil {
			e.rev = resp.Header.Revision
			return e, resp, nil
		}
		if err := again(ctx, s, wait, attempt, err); err != nil {
			return entry{}, nil, err
		}
	}
}

// Acquire enqueues a key and waits until no key that blocks it is older.
func (d *lockDriver) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	e, resp, err := d.enqueue(ctx, mode, true)
	if err != nil {
		return driver.Grant{}, err
	}
	pred := before(resp.Responses[len(resp.Responses)-1].GetResponseRange().Kvs, e.rev)
	if err := d.wait(ctx, e.s, e.q, e.rev, mode, pred, e.rev); err != nil {
		d.drop(e.s, e.id, e.q, e.w)
		return driver.Grant{}, err
	}
	return d.grant(e), nil
}

// before returns the first of kvs (sorted newest first) older than rev.
func before(kvs []*mvccpb.KeyValue, rev int64) *mvccpb.KeyValue {
	for _, kv := range kvs {
		if kv.CreateRevision < rev {
			return kv
		}
	}
	return nil
}

// wait waits until no key that blocks the acquisition (key q, create
// revision rev) is left; pred is the newest such key, read at revision
// read. Each round watches only pred, so a release wakes one waiter.
func (d *lockDriver) wait(ctx context.Context, s *session, q string, rev int64, mode driver.Mode, pred *mvccpb.KeyValue, read int64) error {
	if pred == nil {
		// Nobody before: the usual case is not worth building the reads.
		return s.lostErr()
	}
	get := clientv3.OpGet(d.blockers(mode), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev-1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	mine := clientv3.Compare(clientv3.CreateRevision(q), "=", rev)
	for attempt := 0; pred != nil; {
		err := d.b.waitChange(ctx, s, string(pred.Key), pred.CreateRevision, read)
		switch {
		case errors.Is(err, errWatch):
			if err := backoff(ctx, s, attempt); err != nil {
				return err
			}
			attempt++
		case err != nil:
			return err
		}
		rctx, cancel := d.b.rctx(ctx)
		resp, err := d.b.c.Txn(rctx).If(mine).Then(get).Commit()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !transient(err) {
				return err
			}
			if err := backoff(ctx, s, attempt); err != nil {
				return err
			}
			attempt++
			continue
		}
		if !resp.Succeeded {
			return fmt.Errorf("%w: the waiter's key is gone (lease expired or key removed)", baton.ErrLost)
		}
		read = resp.Header.Revision
		pred = before(resp.Responses[0].GetResponseRange().Kvs, rev)
	}
	// The key was there when last read (or written); refuse a grant on a
	// session known to be gone.
	return s.lostErr()
}

// TryAcquire writes the key only if no key blocks it, in one transaction.
func (d *lockDriver) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	e, resp, err := d.enqueue(ctx, mode, false)
	if err != nil {
		return driver.Grant{}, err
	}
	if !resp.Succeeded {
		d.ids.put(e.s, e.id) // nothing was written
		return driver.Grant{}, baton.ErrLocked
	}
	return d.grant(e), nil
}

// Release deletes the hold's keys if they are still the ones it wrote.
func (d *lockDriver) Release(ctx context.Context, g driver.Grant) error {
	lg, err := driver.DataOf[lockGrant](g)
	if err != nil {
		return err
	}
	lg.s.untrack(lg.loss)
	lg.hw.release()
	ops := make([]clientv3.Op, 1, 2)
	ops[0] = clientv3.OpDelete(lg.q)
	if lg.w != "" {
		ops = append(ops, clientv3.OpDelete(lg.w))
	}
	rctx, cancel := d.b.rctx(ctx)
	resp, err := d.b.c.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(lg.q), "=", lg.rev)).Then(ops...).Commit()
	cancel()
	switch {
	case err != nil:
		// The keys are this hold's own: deleting them later cannot
		// touch anyone else's.
		d.b.cleanup(lg.s, keysOf(lg.q, lg.w)...)
		if lerr := lg.loss.Err(); lerr != nil {
			return lerr
		}
		return err
	case !resp.Succeeded:
		lg.loss.Fire(errHoldGone)
		return lg.loss.Err()
	}
	d.ids.put(lg.s, lg.id)
	if lerr := lg.loss.Err(); lerr != nil {
		return lerr
	}
	return nil
}

// Downgrade rewrites the writer's key as a reader's and deletes its writer
// marker in one transaction. The key keeps its create revision, so later
// writers still wait for it, and readers waiting for the marker go ahead.
func (d *lockDriver) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	if !d.rw {
		return driver.Grant{}, baton.ErrUnsupported
	}
	lg, err := driver.DataOf[lockGrant](g)
	if err != nil {
		return driver.Grant{}, err
	}
	if lg.w == "" {
		return driver.Grant{}, fmt.Errorf("%w: not a write grant", baton.ErrInvalidArgument)
	}
	if lerr := lg.loss.Err(); lerr != nil {
		return driver.Grant{}, lerr
	}
	rctx, cancel := d.b.rctx(ctx)
	resp, err := d.b.c.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(lg.q), "=", lg.rev)).
		Then(clientv3.OpPut(lg.q, d.b.holderValue(driver.Shared.String(), 0), clientv3.WithLease(lg.s.id)), clientv3.OpDelete(lg.w)).
		Commit()
	cancel()
	switch {
	case err != nil:
		return driver.Grant{}, err
	case !resp.Succeeded:
		lg.loss.Fire(errHoldGone)
		return driver.Grant{}, lg.loss.Err()
	}
	ng := *lg
	ng.w = ""
	g.Data = &ng
	return g, nil
}

func (d *lockDriver) Close() error { return nil }

var _ driver.Lock = (*lockDriver)(nil)
