package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

var errClosed = fmt.Errorf("redislock: %w", baton.ErrClosed)

// hold is the driver-private state of one grant (Grant.Data).
type hold struct {
	id     string
	keys   []string // the name's KEYS, made once per acquisition
	keeper *lease.Keeper
	loss   *driver.Loss
	excl   bool // an exclusive lock hold (not a read hold, not permits)
	passes int  // Mutex: times passed on since taken on the server (mutex.go)
}

// queued is what the Mutex and the RWMutex driver share: the keys of the
// name, the acquisition that queues on the server and waits for the
// release script to hand over the lock (Acquire) or only tries
// (TryAcquire), the renewal and the release.
type queued struct {
	d    *backend
	name string
	keys keySet
	wake chan int64
	s    *lockKind
}

// lockKind is what differs between the kinds of lock: the scripts and
// their arguments.
type lockKind struct {
	acquire, poll, cancel, renew, release *redis.Script
	renewKeys                             int // the first renewKeys keys are the renewal's
	// args returns the ARGV of the acquire and poll scripts.
	args func(d *backend, id string, mode driver.Mode, ch string, now time.Time) []any
	// releaseArgs returns the ARGV of the release script.
	releaseArgs func(h *hold) []any
}

// pair reads a {flag, value} script reply.
func pair(v any, err error) (bool, int64, error) {
	if err != nil {
		return false, 0, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return false, 0, fmt.Errorf("unexpected script reply %v", v)
	}
	f, _ := a[0].(int64)
	t, _ := a[1].(int64)
	if f == -1 {
		return false, 0, errNotReady
	}
	return f == 1, t, nil
}

// marker returns the key of the marker (restart.go), the last of q.keys.
func (q *queued) marker() string { return q.keys.marker }

// TryAcquire takes the lock if it is free, without queueing.
func (q *queued) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	for {
		id, keys := q.d.holdID(), q.keys.all()
		sent := time.Now()
		args := q.s.args(q.d, id, mode, "", sent)
		v, acked, err := q.d.run(ctx, q.s.acquire, keys, args...)
		ok, tok, err := pair(v, err)
		if ok && !acked {
			q.cancel(ctx, args)
			return driver.Grant{}, q.d.notReplicated()
		}
		if errors.Is(err, errNotReady) {
			if err = q.d.notReady(ctx, q.marker()); err == nil {
				continue
			}
		}
		if err != nil {
			return driver.Grant{}, err
		}
		if !ok {
			return driver.Grant{}, baton.ErrLocked
		}
		// A reply too late to bound the lease start: renew before
		// trusting the lease (see fresh).
		renew := q.renewFunc(id, keys)
		for err == nil && !q.d.fresh(sent) {
			sent, err = renew(ctx)
		}
		if err == nil {
			return q.granted(id, keys, mode, tok, sent), nil
		}
		if !errors.Is(err, baton.ErrLost) {
			q.cancel(ctx, args)
			return driver.Grant{}, err
		}
		// It expired before it could be confirmed: try again.
	}
}

// Acquire takes the lock, queueing on the server until a release hands it
// over or ctx is done.
func (q *queued) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	if err := q.d.n.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	id := q.d.holdID()
	if q.wake == nil {
		q.wake = make(chan int64, 1)
	}
	wake := q.wake
	q.d.n.register(id, wake)
	defer q.d.n.unregister(id)
	sent := time.Now()
	args := q.s.args(q.d, id, mode, q.d.wake, sent)
	keys := q.keys.all()
	v, acked, err := q.d.run(ctx, q.s.acquire, keys, args...)
	ok, tok, err := pair(v, err)
	err = ctxErr(ctx, err)
	for {
		if ok && !acked {
			q.cancel(ctx, args)
			return driver.Grant{}, q.d.notReplicated()
		}
		if errors.Is(err, errNotReady) {
			// Nothing was changed on the server; poll once it is ready.
			err = q.d.awaitReady(ctx, q.marker())
			if err == nil {
				sent = time.Now()
				v, acked, err = q.d.run(ctx, q.s.poll, keys, args...)
				ok, tok, err = pair(v, err)
				err = ctxErr(ctx, err)
				continue
			}
		}
		if err != nil {
			q.cancel(ctx, args)
			return driver.Grant{}, err
		}
		switch {
		case ok && q.d.fresh(sent):
			return q.granted(id, keys, mode, tok, sent), nil
		case ok:
			// Held, but on a reply too late to bound the lease start (the
			// server was paused, say): poll at once, which renews the
			// lease from now if it still stands and queues us again if
			// it expired.
		default:
			tok, handed, err := q.d.awaitHandoff(ctx, wake, sent)
			if err != nil {
				q.cancel(ctx, args)
				return driver.Grant{}, err
			}
			if handed {
				return q.granted(id, keys, mode, tok, sent), nil
			}
		}
		sent = time.Now()
		v, acked, err = q.d.run(ctx, q.s.poll, keys, args...)
		ok, tok, err = pair(v, err)
		err = ctxErr(ctx, err)
	}
}

// awaitHandoff waits for the handoff message on wake for a renewal period
// at most: a queued waiter checks in that often, to keep its queue entry
// alive and to catch a lost message. It returns ctx's error if ctx ends
// first; handed reports a handoff, with its token, that the waiter may
// trust without a poll.
//
// The release script made the waiter the holder with a lease that started
// when it ran, after the server answered the waiter's last request (sent
// at sent, which found it queued): sent bounds the lease from below. A
// bound too old is confirmed by a poll, and so is every handoff when
// replicas must acknowledge it: the releaser's write is not known to be
// replicated.
func (d *backend) awaitHandoff(ctx context.Context, wake <-chan int64, sent time.Time) (tok int64, handed bool, err error) {
	t := time.NewTimer(d.o.RenewEvery)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, false, ctx.Err()
	case tok = <-wake:
		return tok, d.fresh(sent) && d.o.rep.replicas == 0, nil
	case <-t.C:
		return 0, false, nil
	}
}

// fresh reports whether a lease known to have started after sent may be
// handed to a caller as it is: it has at least TTL - RenewEvery - drift
// left, as much as a lease kept by the keeper has just before each
// renewal. An older one is confirmed on the server first.
func (d *backend) fresh(sent time.Time) bool {
	return time.Since(sent) < d.o.RenewEvery
}

// ctxErr returns ctx's error in place of err when a request failed because
// ctx ended: the client reports a deadline as a network timeout, sometimes
// a moment before ctx itself is done.
func ctxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var ne net.Error
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < time.Millisecond && errors.As(err, &ne) && ne.Timeout() {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

// cancel withdraws a waiter, giving back the lock if it was handed over.
// args are those of its acquisition (the hold id first): the Mutex finds
// the waiter's entry in line by its text.
func (q *queued) cancel(ctx context.Context, args []any) {
	cctx, done := q.d.cleanupCtx(ctx)
	defer done()
	if err := q.s.cancel.Run(cctx, q.d.c, q.keys.all(), args...).Err(); err != nil {
		q.d.o.Logger.Warn("redislock: withdrawing a waiter failed; its entry expires with the TTL",
			"name", q.name, "err", err)
	}
}

func (q *queued) granted(id string, keys []string, mode driver.Mode, tok int64, sent time.Time) driver.Grant {
	loss := driver.NewLoss()
	h := &hold{id: id, keys: keys, loss: loss, excl: mode == driver.Exclusive}
	h.keeper = lease.StartKeeper(sent, &q.d.o.Config, q.renewFunc(id, keys), loss, q.name)
	return driver.Grant{Token: uint64(tok), Loss: loss, Data: h}
}

func (q *queued) renewFunc(id string, keys []string) lease.RenewFunc {
	return q.d.renewFunc(q.s.renew, keys[:q.s.renewKeys], id)
}

func (q *queued) Release(ctx context.Context, g driver.Grant) error {
	h, err := holdOf(g)
	if err != nil {
		return err
	}
	h.keeper.Stop()
	r, err := q.s.release.Run(ctx, q.d.c, h.keys, q.s.releaseArgs(h)...).Int64()
	return finish(h, r, err)
}

func (q *queued) Close() error { return nil }

// renewFunc returns the renewal of hold id by script, whose KEYS are keys.
func (d *backend) renewFunc(script *redis.Script, keys []string, id string) lease.RenewFunc {
	ttl := d.ttlMS()
	return func(ctx context.Context) (time.Time, error) {
		sent := time.Now()
		v, acked, err := d.run(ctx, script, keys, id, ttl)
		if err = renewed(v, err); err == nil && !acked {
			// Renewed on the master only: a failover now could promote a
			// replica whose lease ends earlier. Retried until the deadline.
			err = fmt.Errorf("renewal: %w", ErrNotReplicated)
		}
		return sent, err
	}
}

// renewed reads the reply of a renewal script.
func renewed(v any, err error) error {
	if err != nil {
		return err
	}
	if r, _ := v.(int64); r != 1 {
		return fmt.Errorf("the server no longer has the hold: %w", baton.ErrLost)
	}
	return nil
}

func holdOf(g driver.Grant) (*hold, error) {
	return driver.DataOf[hold](g)
}

// finish interprets a release script's reply.
func finish(h *hold, released int64, err error) error {
	if err != nil {
		if e := h.loss.Err(); e != nil {
			return fmt.Errorf("%w (release: %w)", e, err)
		}
		return fmt.Errorf("release: %w", err)
	}
	if released != 1 {
		h.loss.Fire(errors.New("the server no longer had the hold at release"))
		return h.loss.Err()
	}
	return h.loss.Err()
}
