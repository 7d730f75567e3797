package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// condDriver is one handle's connection to a Cond name. A waiter is a key
// in the name's directory; waking it means deleting its key.
type condDriver struct {
	b     *backend
	name  string
	queue string // directory of the waiters' keys, ending in '/'
	ids   ids
}

// condTicket is one registered waiter.
type condTicket struct {
	s   *session
	id  string
	key string
	rev int64
}

func (b *backend) OpenCond(_ context.Context, name string) (driver.Cond, error) {
	return &condDriver{b: b, name: name, queue: b.dir(baton.KindCond, name) + "q/"}, nil
}

// Prepare writes the waiter's key. A Signal that comes after it returns
// deletes this key or an older one, never misses it.
func (d *condDriver) Prepare(ctx context.Context) (any, error) {
	s, err := d.b.session(ctx)
	if err != nil {
		return nil, err
	}
	id := d.ids.get(s)
	key := d.queue + id
	resp, err := d.b.commit(ctx, s, []string{key}, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return d.b.c.Txn(ctx).Then(clientv3.OpPut(key, d.b.holderValue("", 0), clientv3.WithLease(s.id))).Commit()
	})
	if err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	return &condTicket{s: s, id: id, key: key, rev: resp.Header.Revision}, nil
}

// Wait returns when the ticket's key is deleted.
func (d *condDriver) Wait(ctx context.Context, ticket any) error {
	t, ok := ticket.(*condTicket)
	if !ok {
		return fmt.Errorf("%w: foreign ticket", baton.ErrInvalidArgument)
	}
	read := t.rev
	for attempt := 0; ; {
		err := d.b.waitChange(ctx, t.s, t.key, t.rev, read)
		switch {
		case ctx.Err() != nil:
			d.withdraw(t)
			return ctx.Err()
		case errors.Is(err, errWatch):
			if err := backoff(ctx, t.s, attempt); err != nil {
				d.withdraw(t)
				return err
			}
			attempt++
		case err != nil:
			d.withdraw(t)
			return err
		}
		rctx, cancel := d.b.rctx(ctx)
		resp, err := d.b.c.Get(rctx, t.key, clientv3.WithKeysOnly())
		cancel()
		if err != nil {
			continue
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.rev {
			// Deleted by Signal or Broadcast.
			d.ids.put(t.s, t.id)
			return nil
		}
		read = resp.Header.Revision
	}
}

// withdraw deletes the ticket's key; if it was already deleted, a Signal
// chose this waiter, and the wake-up is passed on.
func (d *condDriver) withdraw(t *condTicket) {
	ctx, cancel := context.WithTimeout(context.Background(), min(d.b.o.requestTimeout, 500*time.Millisecond))
	defer cancel()
	resp, err := d.b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).
		Then(clientv3.OpDelete(t.key)).
		Commit()
	if err != nil {
		d.b.cleanup(t.s, t.key)
		return
	}
	d.ids.put(t.s, t.id)
	if !resp.Succeeded {
		_ = d.Signal(ctx)
	}
}

func (d *condDriver) Cancel(ticket any) {
	if t, ok := ticket.(*condTicket); ok {
		d.withdraw(t)
	}
}

// Signal deletes the oldest waiter's key.
func (d *condDriver) Signal(ctx context.Context) error {
	for {
		rctx, cancel := d.b.rctx(ctx)
		resp, err := d.b.c.Get(rctx, d.queue, append(clientv3.WithFirstCreate(), clientv3.WithKeysOnly())...)
		cancel()
		if err != nil {
			return lease.CtxErr(ctx, err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		kv := resp.Kvs[0]
		rctx, cancel = d.b.rctx(ctx)
		tresp, err := d.b.c.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).
			Commit()
		cancel()
		if err != nil {
			return lease.CtxErr(ctx, err)
		}
		if tresp.Succeeded {
			return nil
		}
		// That waiter left or was woken meanwhile: the next oldest.
	}
}

// Broadcast deletes every waiter's key in one request.
func (d *condDriver) Broadcast(ctx context.Context) error {
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	if _, err := d.b.c.Delete(rctx, d.queue, clientv3.WithPrefix()); err != nil {
		return lease.CtxErr(ctx, err)
	}
	return nil
}

func (d *condDriver) Close() error { return nil }

var _ driver.Cond = (*condDriver)(nil)
