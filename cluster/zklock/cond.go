package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// condDriver is one handle's connection to a Cond name. A waiter is a node
// in the name's queue; waking it means deleting its node.
type condDriver struct {
	b   *backend
	dir string
}

type condTicket struct{ n *node }

func (b *backend) OpenCond(_ context.Context, name string) (driver.Cond, error) {
	return &condDriver{b: b, dir: b.dir(baton.KindCond, name)}, nil
}

// Prepare creates the waiter's node. A Signal that comes after it returns
// deletes this node or an older one, never misses it (Signal syncs its
// server with the leader before it reads the queue).
func (d *condDriver) Prepare(ctx context.Context) (any, error) {
	n, err := d.b.create(ctx, d.dir, nil, 'c', nil)
	if err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	return &condTicket{n}, nil
}

// Wait returns when the ticket's node is deleted.
func (d *condDriver) Wait(ctx context.Context, ticket any) error {
	t, ok := ticket.(*condTicket)
	if !ok {
		return fmt.Errorf("%w: foreign ticket", baton.ErrInvalidArgument)
	}
	for attempt := 0; ; {
		type got struct {
			ok bool
			w  <-chan zk.Event
		}
		g, err := call(d.b, ctx, func() (got, error) {
			ok, _, w, err := d.b.c.ExistsW(t.n.path)
			return got{ok, w}, err
		})
		if err == nil && !g.ok {
			return nil // signalled
		}
		if err == nil {
			err = waitEvent(ctx, t.n.e, g.w)
			if err == nil {
				continue
			}
		}
		if ctx.Err() == nil && t.n.e.ended() != nil {
			if err = d.b.revive(ctx, t.n); err == nil {
				continue
			}
		} else if ctx.Err() == nil && transient(err) {
			if err = d.b.backoff(ctx, t.n.e, attempt); err == nil {
				attempt++
				continue
			}
		}
		d.withdraw(t)
		return lease.CtxErr(ctx, err)
	}
}

// withdraw deletes the ticket's node; if it was already deleted, a Signal
// chose this waiter, and the wake-up is passed on.
func (d *condDriver) withdraw(t *condTicket) {
	err := d.b.remove(t.n)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		if t.n.e.ended() == nil {
			_ = d.Signal(context.Background())
		}
	case err != nil:
		d.b.forget(t.n, nil)
	}
}

func (d *condDriver) Cancel(ticket any) {
	if t, ok := ticket.(*condTicket); ok {
		d.withdraw(t)
	}
}

// waiters syncs the server with the leader and returns the queue's nodes.
func (d *condDriver) waiters(ctx context.Context) ([]entry, error) {
	q := d.dir + "/q"
	names, err := call(d.b, ctx, func() ([]string, error) {
		if _, err := d.b.c.Sync(q); err != nil {
			return nil, err
		}
		ns, _, err := d.b.c.Children(q)
		return ns, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return parseQueue(names), lease.CtxErr(ctx, err)
}

// Signal deletes the oldest waiter's node.
func (d *condDriver) Signal(ctx context.Context) error {
	es, err := d.waiters(ctx)
	if err != nil {
		return err
	}
	for _, e := range es {
		err := d.b.c.Delete(d.dir+"/q/"+e.name, -1)
		if err == nil {
			d.b.tidy(d.dir)
			return nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		// That waiter left or was woken meanwhile: the next oldest.
	}
	d.b.tidy(d.dir)
	return nil
}

// Broadcast deletes every waiter's node.
func (d *condDriver) Broadcast(ctx context.Context) error {
	es, err := d.waiters(ctx)
	if err != nil {
		return err
	}
	errs := make([]error, len(es))
	done := make(chan int, len(es))
	for i, e := range es {
		go func() {
			errs[i] = noNode(d.b.c.Delete(d.dir+"/q/"+e.name, -1))
			done <- i
		}()
	}
	for range es {
		<-done
	}
	d.b.tidy(d.dir)
	return errors.Join(errs...)
}

func (d *condDriver) Close() error { return nil }

var _ driver.Cond = (*condDriver)(nil)
