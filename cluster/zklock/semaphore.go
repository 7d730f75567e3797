package zklock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// semDriver is one handle's connection to a semaphore name.
//
// Every acquisition is a node in the queue whose data is the number of
// permits it holds or asks for. A node holds when the permits of all nodes
// up to and including it fit in the capacity: strict FIFO, so a large
// request is not starved by small ones. That sum only falls as time goes
// on (nodes before a node are only deleted or lowered, new ones come
// after), so a node that fits keeps fitting, and the holders are always a
// prefix of the queue.
//
// A waiter whose predecessor does not fit watches that predecessor only; a
// node that is granted while it had a successor rewrites its data to wake
// it. The first waiter that the permits in use keep out watches the holders
// before it, each of which it alone watches. So a release wakes one waiter.
type semDriver struct {
	b        *backend
	dir      string
	capacity int64
	capData  []byte
}

type semGrant struct {
	n    *node
	loss *driver.Loss

	mu sync.Mutex // serialises partial releases
	k  int64      // permits still held; guarded by mu
}

func (b *backend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	d := &semDriver{b: b, dir: b.dir(baton.KindSemaphore, name), capacity: permits, capData: []byte(strconv.FormatInt(permits, 10))}
	_, err := call(b, ctx, func() (struct{}, error) {
		var data []byte
		for range 8 {
			if err := b.ensure(d.dir, d.capData); err != nil {
				return struct{}{}, err
			}
			var err error
			// NoNode: deleted as idle (remove) between the two; again.
			if data, _, err = b.c.Get(d.dir); !errors.Is(err, zk.ErrNoNode) {
				if err != nil {
					return struct{}{}, err
				}
				break
			}
		}
		if c, perr := strconv.ParseInt(string(data), 10, 64); perr != nil || c != permits {
			return struct{}{}, fmt.Errorf("%w: capacity %q recorded, %d asked", baton.ErrMismatch, data, permits)
		}
		return struct{}{}, nil
	})
	if err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	return d, nil
}

func (d *semDriver) Capacity() int64 { return d.capacity }

func (d *semDriver) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	return d.acquire(ctx, n, true)
}

func (d *semDriver) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	return d.acquire(ctx, n, false)
}

func (d *semDriver) acquire(ctx context.Context, k int64, block bool) (driver.Grant, error) {
	n, err := d.b.enqueue(ctx, d.dir, d.capData, 's', []byte(strconv.FormatInt(k, 10)), block)
	if err != nil {
		return driver.Grant{}, err
	}
	if err := d.wait(ctx, n, k, block); err != nil {
		d.b.forget(n, nil)
		return driver.Grant{}, err
	}
	if err := d.b.revive(ctx, n); err != nil {
		d.b.forget(n, nil)
		return driver.Grant{}, err
	}
	loss := driver.NewLoss()
	n.e.track(loss)
	return driver.Grant{Token: n.token, Loss: loss, N: k, Data: &semGrant{n: n, loss: loss, k: k}}, nil
}

// weight is what a node read says: its permits, whether it exists, and a
// watch when one was asked for.
type weight struct {
	k  int64
	ok bool
	w  <-chan zk.Event
}

// weights reads the permits of the nodes at paths concurrently, with a
// watch on those whose index is in watch.
func (d *semDriver) weights(ctx context.Context, paths []string, watch func(int) bool) ([]weight, error) {
	ws := make([]weight, len(paths))
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() {
			var data []byte
			var err error
			if watch(i) {
				data, _, ws[i].w, err = d.b.c.GetW(p)
			} else {
				data, _, err = d.b.c.Get(p)
			}
			switch {
			case errors.Is(err, zk.ErrNoNode):
			case err != nil:
				errs[i] = err
			default:
				ws[i].ok = true
				ws[i].k, err = strconv.ParseInt(string(data), 10, 64)
				if err != nil {
					errs[i] = fmt.Errorf("node %s: permits %q", p, data)
				}
			}
		})
	}
	_, err := call(d.b, ctx, func() (struct{}, error) { wg.Wait(); return struct{}{}, errors.Join(errs...) })
	return ws, err
}

func (d *semDriver) children(ctx context.Context, n *node) ([]entry, int, error) {
	names, err := call(d.b, ctx, func() ([]string, error) {
		ns, _, err := d.b.c.Children(n.q)
		return ns, noNode(err) // no queue: the node is gone with it
	})
	if err != nil {
		return nil, 0, err
	}
	es := parseQueue(names)
	i := indexOf(es, n.name)
	if i < 0 {
		if err := n.e.lostErr(); err != nil {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("%w: the waiter's node is gone (removed)", baton.ErrLost)
	}
	return es, i, nil
}

// wait returns nil once n, asking for k permits, fits.
func (d *semDriver) wait(ctx context.Context, n *node, k int64, block bool) error {
	for attempt := 0; ; {
		err := d.round(ctx, n, k, block)
		if err == nil || errors.Is(err, baton.ErrLocked) || ctx.Err() != nil {
			return lease.CtxErr(ctx, err)
		}
		if err := d.b.retry(ctx, n, err, &attempt); err != nil {
			return err
		}
	}
}

// round reads the queue, returns nil when n fits and otherwise waits for
// one change that may let it in.
func (d *semDriver) round(ctx context.Context, n *node, k int64, block bool) error {
	for {
		es, i, err := d.children(ctx, n)
		if err != nil {
			return err
		}
		paths := make([]string, i)
		for j := range paths {
			paths[j] = n.q + "/" + es[j].name
		}
		ws, err := d.weights(ctx, paths, func(j int) bool { return block && j == i-1 })
		if err != nil {
			return err
		}
		var sum int64
		for _, w := range ws {
			sum += w.k
		}
		if sum+k <= d.capacity {
			return d.granted(ctx, n, k, es, i)
		}
		if !block {
			return errBlocked
		}
		if sum > d.capacity {
			// The predecessor does not fit either: it wakes us when it
			// is granted or goes.
			if w := ws[i-1]; w.ok {
				if err := waitEvent(ctx, n.e, w.w); err != nil {
					return err
				}
			}
			continue
		}
		// Everything before n holds: watch all of it.
		ws, err = d.weights(ctx, paths, func(int) bool { return true })
		if err != nil {
			return err
		}
		sum = 0
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(n.e.done)},
		}
		for _, w := range ws {
			sum += w.k
			if w.ok {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.w)})
			}
		}
		if sum+k <= d.capacity {
			return d.granted(ctx, n, k, es, i)
		}
		switch chosen, v, _ := reflect.Select(cases); chosen {
		case 0:
			return ctx.Err()
		case 1:
			return n.e.lostErr()
		default:
			if ev, _ := v.Interface().(zk.Event); errors.Is(ev.Err, zk.ErrSessionExpired) {
				n.e.end(errExpired)
				return n.e.lostErr()
			}
		}
	}
}

// granted wakes n's successor, if it may be waiting on n: one that was in
// the queue when it was read, or that came while the permits were read (a
// successor that came later reads n's permits after n fit).
func (d *semDriver) granted(ctx context.Context, n *node, k int64, es []entry, i int) error {
	if i == len(es)-1 && i > 0 {
		var err error
		if es, i, err = d.children(ctx, n); err != nil {
			return err
		}
	}
	if i == len(es)-1 {
		return nil
	}
	// Rewriting the same permits is enough to fire the successor's watch.
	_, err := call(d.b, ctx, func() (*zk.Stat, error) {
		return d.b.c.Set(n.path, []byte(strconv.FormatInt(k, 10)), -1)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("%w: the waiter's node is gone (removed)", baton.ErrLost)
	}
	return err
}

// Release gives back k permits: the node goes when all of them do, and its
// data is lowered otherwise.
func (d *semDriver) Release(ctx context.Context, g driver.Grant, k int64) error {
	sg, err := driver.DataOf[semGrant](g)
	if err != nil {
		return err
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if k <= 0 || k > sg.k {
		return fmt.Errorf("%w: release of %d permits, %d held", baton.ErrInvalidArgument, k, sg.k)
	}
	if err := sg.loss.Err(); err != nil {
		if k == sg.k {
			sg.n.e.untrack(sg.loss)
			d.b.forget(sg.n, nil)
		}
		return err
	}
	if k == sg.k {
		sg.n.e.untrack(sg.loss)
		_, err = req(d.b, ctx, func() (struct{}, error) { return struct{}{}, d.b.remove(sg.n) })
	} else {
		_, err = req(d.b, ctx, func() (*zk.Stat, error) {
			return d.b.c.Set(sg.n.path, []byte(strconv.FormatInt(sg.k-k, 10)), -1)
		})
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		sg.loss.Fire(errors.New("the hold's node is gone"))
	case err != nil:
		if k == sg.k {
			d.b.forget(sg.n, nil)
		}
		// As for a lock (lock.go): nothing vouches for the permits.
		sg.loss.Fire(fmt.Errorf("release: %w", err))
		return sg.loss.Err()
	}
	sg.k -= k
	return sg.loss.Err()
}

func (d *semDriver) Close() error { return nil }

var _ driver.Semaphore = (*semDriver)(nil)
