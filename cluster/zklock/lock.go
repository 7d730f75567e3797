package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// lockDriver is one handle's connection to a Mutex or RWMutex name. The
// core calls it one operation at a time and gives it at most one grant at
// a time.
type lockDriver struct {
	b   *backend
	dir string
	rw  bool
}

// lockGrant is the driver's state of one hold.
type lockGrant struct {
	n    *node
	loss *driver.Loss
	pass uint64 // how many times the hold was passed (Mutex only)
}

// downgraded is the data of a write node turned into a read node: a
// node's name cannot change, and a new node would lose its place.
var downgraded = []byte("r")

func (b *backend) OpenMutex(_ context.Context, name string) (driver.Lock, error) {
	return &mutexDriver{lockDriver{b: b, dir: b.dir(baton.KindMutex, name)}}, nil
}

func (b *backend) OpenRWMutex(_ context.Context, name string) (driver.Lock, error) {
	return &lockDriver{b: b, dir: b.dir(baton.KindRWMutex, name), rw: true}, nil
}

func (d *lockDriver) tag(mode driver.Mode) byte {
	switch {
	case !d.rw:
		return 'm'
	case mode == driver.Shared:
		return 'r'
	}
	return 'w'
}

// Acquire adds a node to the queue and waits until no node before it
// blocks it: any node for a writer or a mutex, a write node that was not
// downgraded for a reader. Each round watches one node, the nearest that
// blocks, so a release wakes one waiter (and the readers behind a writer
// wake when that writer goes, each on its own watch of it).
func (d *lockDriver) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return d.acquire(ctx, mode, true)
}

// TryAcquire adds a node and takes it back at once if anything blocks it.
func (d *lockDriver) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return d.acquire(ctx, mode, false)
}

func (d *lockDriver) acquire(ctx context.Context, mode driver.Mode, block bool) (driver.Grant, error) {
	n, err := d.b.enqueue(ctx, d.dir, nil, d.tag(mode), nil, block)
	if err != nil {
		return driver.Grant{}, err
	}
	if err := d.wait(ctx, n, mode, block); err != nil {
		d.b.forget(n, nil)
		return driver.Grant{}, err
	}
	return d.grant(ctx, n)
}

var errBlocked = fmt.Errorf("%w", baton.ErrLocked)

// wait returns nil once nothing blocks n. With block false it returns
// errBlocked instead of waiting.
func (d *lockDriver) wait(ctx context.Context, n *node, mode driver.Mode, block bool) error {
	for attempt := 0; ; {
		w, err := d.blocker(ctx, n, mode, block)
		if err == nil && w == nil {
			return d.b.revive(ctx, n)
		}
		if err == nil && !block {
			return errBlocked
		}
		if err == nil {
			err = waitEvent(ctx, n.e, w)
			if err == nil {
				continue
			}
		}
		if ctx.Err() != nil {
			return lease.CtxErr(ctx, err)
		}
		if err := d.b.retry(ctx, n, err, &attempt); err != nil {
			return err
		}
	}
}

// blocker reads the queue and returns a watch on the nearest node that
// blocks n, or nil when none does. With watch false it sets no watch and
// returns a closed channel for a blocker.
func (d *lockDriver) blocker(ctx context.Context, n *node, mode driver.Mode, watch bool) (<-chan zk.Event, error) {
	names, err := call(d.b, ctx, func() ([]string, error) {
		ns, _, err := d.b.c.Children(n.q)
		return ns, noNode(err) // no queue: the node is gone with it
	})
	if err != nil {
		return nil, err
	}
	es := parseQueue(names)
	i := indexOf(es, n.name)
	if i < 0 {
		if err := n.e.lostErr(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the waiter's node is gone (removed)", baton.ErrLost)
	}
	for j := i - 1; j >= 0; j-- {
		if mode == driver.Shared && es[j].tag != 'w' {
			continue
		}
		p := n.q + "/" + es[j].name
		type got struct {
			ok   bool
			data []byte
			w    <-chan zk.Event
		}
		g, err := call(d.b, ctx, func() (got, error) {
			switch {
			case mode == driver.Shared && watch:
				data, _, w, err := d.b.c.GetW(p)
				return got{err == nil, data, w}, noNode(err)
			case mode == driver.Shared:
				data, _, err := d.b.c.Get(p)
				return got{err == nil, data, nil}, noNode(err)
			case watch:
				ok, _, w, err := d.b.c.ExistsW(p)
				return got{ok, nil, w}, err
			}
			ok, _, err := d.b.c.Exists(p)
			return got{ok, nil, nil}, err
		})
		switch {
		case err != nil:
			return nil, err
		case !g.ok:
			if mode == driver.Shared {
				continue // gone: look further back
			}
			return closedEvent, nil // gone: read the queue again
		case mode == driver.Shared && string(g.data) == string(downgraded):
			continue
		}
		if g.w == nil {
			return closedEvent, nil
		}
		return g.w, nil
	}
	return nil, nil
}

// closedEvent is a watch that has already fired.
var closedEvent = func() <-chan zk.Event {
	ch := make(chan zk.Event, 1)
	ch <- zk.Event{}
	close(ch)
	return ch
}()

func noNode(err error) error {
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

func indexOf(es []entry, name string) int {
	for i := range es {
		if es[i].name == name {
			return i
		}
	}
	return -1
}

func (d *lockDriver) grant(ctx context.Context, n *node) (driver.Grant, error) {
	if err := d.b.revive(ctx, n); err != nil {
		d.b.forget(n, nil)
		return driver.Grant{}, err
	}
	tok := n.token
	if !d.rw {
		if tok > maxZxid {
			d.b.forget(n, nil)
			return driver.Grant{}, errZxidRange
		}
		tok = mutexToken(tok, 0)
	}
	loss := driver.NewLoss()
	n.e.track(loss)
	return driver.Grant{Token: tok, Loss: loss, Data: &lockGrant{n: n, loss: loss}}, nil
}

// Release deletes the hold's node, which only this acquisition ever had.
// A hold already lost is given back in the background: its connection is
// likely down, and the caller learns nothing more by waiting.
func (d *lockDriver) Release(ctx context.Context, g driver.Grant) error {
	lg, err := driver.DataOf[lockGrant](g)
	if err != nil {
		return err
	}
	lg.n.e.untrack(lg.loss)
	if err := lg.loss.Err(); err != nil {
		d.b.forget(lg.n, nil)
		return err
	}
	_, err = req(d.b, ctx, func() (struct{}, error) { return struct{}{}, d.b.remove(lg.n) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		lg.loss.Fire(errors.New("the hold's node is gone"))
	case err != nil:
		d.b.forget(lg.n, nil)
		// No answer on the session (closed by the server, expired, or
		// cut off): nothing vouches for the hold up to its release.
		lg.loss.Fire(fmt.Errorf("release: %w", err))
	}
	return lg.loss.Err()
}

// Downgrade marks the write node as a read node in place: it keeps its
// place, so later writers still wait for it, and the readers watching it
// see the change and go ahead.
func (d *lockDriver) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	if !d.rw {
		return driver.Grant{}, baton.ErrUnsupported
	}
	lg, err := driver.DataOf[lockGrant](g)
	if err != nil {
		return driver.Grant{}, err
	}
	if lg.n.name[0] != 'w' {
		return driver.Grant{}, fmt.Errorf("%w: not a write grant", baton.ErrInvalidArgument)
	}
	if err := lg.loss.Err(); err != nil {
		return driver.Grant{}, err
	}
	_, err = req(d.b, ctx, func() (*zk.Stat, error) { return d.b.c.Set(lg.n.path, downgraded, -1) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		lg.loss.Fire(errors.New("the hold's node is gone"))
		return driver.Grant{}, lg.loss.Err()
	case err != nil:
		return driver.Grant{}, err
	}
	return g, nil
}

func (d *lockDriver) Close() error { return nil }

// transient reports whether a failed request may succeed if tried again on
// the same session.
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrNothing)
}

// enqueue adds an acquisition's node to the queue of dir (create). A
// blocking acquisition tries again after a transient error, as long as ctx
// lasts; a try gives up at once.
func (b *backend) enqueue(ctx context.Context, dir string, dirData []byte, tag byte, data []byte, block bool) (*node, error) {
	for attempt := 0; ; attempt++ {
		n, err := b.create(ctx, dir, dirData, tag, data)
		if err == nil {
			return n, nil
		}
		if !block || ctx.Err() != nil || !transient(err) {
			return nil, lease.CtxErr(ctx, err)
		}
		if err := b.backoff(ctx, nil, attempt); err != nil {
			return nil, err
		}
	}
}

// retry decides what a queue round that failed with err does next: an
// ended session is revived and the round runs again at once, a transient
// error backs off first, any other error is returned.
func (b *backend) retry(ctx context.Context, n *node, err error, attempt *int) error {
	if n.e.ended() != nil {
		return b.revive(ctx, n)
	}
	if !transient(err) {
		return err
	}
	if err := b.backoff(ctx, n.e, *attempt); err != nil && n.e.ended() == nil {
		return err
	}
	*attempt++
	return nil
}

// backoff waits before a retry; it returns an error when ctx ends, the
// epoch e (if not nil) ends or the backend closes first.
func (b *backend) backoff(ctx context.Context, e *epoch, attempt int) error {
	t := time.NewTimer(min(time.Duration(attempt+1)*25*time.Millisecond, 500*time.Millisecond))
	defer t.Stop()
	var done <-chan struct{}
	if e != nil {
		done = e.done
	}
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return e.lostErr()
	case <-b.stop:
		return baton.ErrClosed
	}
}

var _ driver.Lock = (*lockDriver)(nil)
