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
	keeper *lease.Keeper
	loss   *driver.Loss
	excl   bool // an exclusive lock hold (not a read hold, not permits)
	// A Mutex hold goes round the handles of its backend (local.go):
	passes int       // times passed on since taken on the server
	taken  time.Time // when it was taken on the server
}

// lockDriver serves one Mutex or RWMutex handle. The core calls it one
// operation at a time, so it has no mutex of its own.
//
// A Mutex uses the mutex_*.lua scripts, whose hold is one key (see
// mutex_common.lua); an RWMutex uses the lock_*.lua scripts, whose holders
// are a sorted set.
type lockDriver struct {
	d    *backend
	name string
	keys []string
	rw   bool
	wake chan int64 // wake-up of the acquisition in progress; see notifier.register
}

var _ driver.Lock = (*lockDriver)(nil)

func modeArg(m driver.Mode) string {
	if m == driver.Shared {
		return "r"
	}
	return "w"
}

// pair reads a {flag, value} script reply.
func pair(v any, err error) (bool, int64, error) {
	if err != nil {
		return false, 0, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return false, 0, fmt.Errorf("redislock: unexpected script reply %v", v)
	}
	f, _ := a[0].(int64)
	t, _ := a[1].(int64)
	if f == -1 {
		return false, 0, errNotReady
	}
	return f == 1, t, nil
}

// marker returns the key of the marker (restart.go), the last of l.keys.
func (l *lockDriver) marker() string { return l.keys[len(l.keys)-1] }

func (l *lockDriver) what() string {
	if l.rw {
		return "rwmutex"
	}
	return "mutex"
}

// acquireArgs returns the ARGV of the acquire and poll scripts.
func (l *lockDriver) acquireArgs(id string, mode driver.Mode, ch string, now time.Time) []any {
	if l.rw {
		return []any{id, modeArg(mode), l.d.ttlMS(), l.d.meta, ch}
	}
	return []any{id, l.d.ttlMS(), l.d.meta, now.UnixMilli(), ch}
}

func (l *lockDriver) scripts() (acquire, poll, cancel, release *redis.Script) {
	if l.rw {
		return scriptLockAcquire, scriptLockPoll, scriptLockCancel, scriptLockRelease
	}
	return scriptMutexAcquire, scriptMutexPoll, scriptMutexCancel, scriptMutexRelease
}

func (l *lockDriver) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if l.rw {
		return l.tryServer(ctx, mode)
	}
	if !l.d.localTry(l.name) {
		return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, baton.ErrLocked)
	}
	g, err := l.tryServer(ctx, mode)
	if err != nil {
		l.d.localDone(l.name)
	}
	return g, err
}

func (l *lockDriver) tryServer(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	acquire, _, _, _ := l.scripts()
	for {
		id := l.d.holdID()
		sent := time.Now()
		ok, tok, err := pair(acquire.Run(ctx, l.d.c, l.keys, l.acquireArgs(id, mode, "", sent)...).Result())
		if errors.Is(err, errNotReady) {
			if err = l.d.notReady(ctx, l.marker()); err == nil {
				continue
			}
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, err)
		}
		if !ok {
			return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, baton.ErrLocked)
		}
		// A reply too late to bound the lease start: renew before
		// trusting the lease (see fresh).
		renew := l.renewFunc(id)
		for err == nil && !l.d.fresh(sent) {
			sent, err = renew(ctx)
		}
		if err == nil {
			return l.granted(id, mode, tok, sent), nil
		}
		if !errors.Is(err, baton.ErrLost) {
			l.cancel(ctx, id)
			return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, err)
		}
		// It expired before it could be confirmed: try again.
	}
}

func (l *lockDriver) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, err)
	}
	if l.rw {
		return l.acquireServer(ctx, mode)
	}
	g, passed, err := l.d.localTurnFor(ctx, l.name)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, err)
	}
	if passed {
		return g, nil
	}
	g, err = l.acquireServer(ctx, mode)
	if err != nil {
		l.d.localDone(l.name)
	}
	return g, err
}

func (l *lockDriver) acquireServer(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if err := l.d.n.start(ctx); err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, err)
	}
	id := l.d.holdID()
	wake := l.wake
	l.d.n.register(id, wake)
	defer l.d.n.unregister(id)
	acquire, poll, _, _ := l.scripts()
	sent := time.Now()
	args := l.acquireArgs(id, mode, l.d.wake, sent)
	ok, tok, err := pair(acquire.Run(ctx, l.d.c, l.keys, args...).Result())
	err = ctxErr(ctx, err)
	for {
		if errors.Is(err, errNotReady) {
			// Nothing was changed on the server; poll once it is ready.
			err = ctxErr(ctx, l.d.awaitReady(ctx, l.marker()))
			if err == nil {
				sent = time.Now()
				ok, tok, err = pair(poll.Run(ctx, l.d.c, l.keys, args...).Result())
				err = ctxErr(ctx, err)
				continue
			}
		}
		if err != nil {
			l.cancel(ctx, id)
			return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, err)
		}
		switch {
		case ok && l.d.fresh(sent):
			return l.granted(id, mode, tok, sent), nil
		case ok:
			// Held, but on a reply too late to bound the lease start (the
			// server was paused, say): poll at once, which renews the
			// lease from now if it still stands and queues us again if
			// it expired.
		default:
			// Queued: wait for the handoff message; check in every
			// RenewEvery to keep the queue entry alive (and to catch a
			// lost message).
			t := time.NewTimer(l.d.o.RenewEvery)
			select {
			case <-ctx.Done():
				t.Stop()
				l.cancel(ctx, id)
				return driver.Grant{}, fmt.Errorf("redislock: %s %q: %w", l.what(), l.name, ctx.Err())
			case tok := <-wake:
				t.Stop()
				// The release script made us the holder with a lease
				// that started when it ran, after the server answered
				// our last request (which found us queued): that
				// request's send time bounds the lease from below. A
				// bound too old is confirmed by the poll below.
				if l.d.fresh(sent) {
					return l.granted(id, mode, tok, sent), nil
				}
			case <-t.C:
			}
		}
		sent = time.Now()
		ok, tok, err = pair(poll.Run(ctx, l.d.c, l.keys, args...).Result())
		err = ctxErr(ctx, err)
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
func (l *lockDriver) cancel(ctx context.Context, id string) {
	cctx, done := l.d.cleanupCtx(ctx)
	defer done()
	_, _, cancel, _ := l.scripts()
	if err := cancel.Run(cctx, l.d.c, l.keys, id).Err(); err != nil {
		l.d.o.Logger.Warn("redislock: withdrawing a waiter failed; its entry expires with the TTL",
			"name", l.name, "err", err)
	}
}

func (l *lockDriver) granted(id string, mode driver.Mode, tok int64, sent time.Time) driver.Grant {
	loss := driver.NewLoss()
	h := &hold{id: id, loss: loss, excl: mode == driver.Exclusive, taken: time.Now()}
	h.keeper = lease.StartKeeper(sent, &l.d.o.Config, l.renewFunc(id), loss, l.name)
	return driver.Grant{Token: uint64(tok), Loss: loss, Data: h}
}

func (l *lockDriver) renewFunc(id string) lease.RenewFunc {
	if l.rw {
		return l.d.renewFunc(l.keys[:2], id)
	}
	return l.d.mutexRenewFunc(l.keys[:1], id)
}

func (d *backend) renewFunc(keys []string, id string) lease.RenewFunc {
	ttl := d.ttlMS()
	return func(ctx context.Context) (time.Time, error) {
		sent := time.Now()
		return sent, renewed(scriptRenew.Run(ctx, d.c, keys, id, ttl).Int64())
	}
}

func (d *backend) mutexRenewFunc(keys []string, id string) lease.RenewFunc {
	ttl := d.ttlMS()
	return func(ctx context.Context) (time.Time, error) {
		sent := time.Now()
		return sent, renewed(scriptMutexRenew.Run(ctx, d.c, keys, id, ttl).Int64())
	}
}

// renewed reads the reply of a renewal script.
func renewed(r int64, err error) error {
	if err != nil {
		return err
	}
	if r != 1 {
		return fmt.Errorf("redislock: the server no longer has the hold: %w", baton.ErrLost)
	}
	return nil
}

func holdOf(g driver.Grant) (*hold, error) {
	h, ok := g.Data.(*hold)
	if !ok || h == nil {
		return nil, fmt.Errorf("redislock: grant of another backend: %w", baton.ErrInvalidArgument)
	}
	return h, nil
}

// finish stops renewal and interprets a release script's reply.
func finish(what, name string, h *hold, released int64, err error) error {
	if err != nil {
		if h.loss.Err() != nil {
			return fmt.Errorf("redislock: %s %q: %w (release: %w)", what, name, h.loss.Err(), err)
		}
		return fmt.Errorf("redislock: %s %q: release: %w", what, name, err)
	}
	if released != 1 {
		h.loss.Fire(errors.New("the server no longer had the hold at release"))
		return fmt.Errorf("redislock: %s %q: %w", what, name, baton.ErrLost)
	}
	if e := h.loss.Err(); e != nil {
		return fmt.Errorf("redislock: %s %q: %w", what, name, e)
	}
	return nil
}

func (l *lockDriver) Release(ctx context.Context, g driver.Grant) error {
	h, err := holdOf(g)
	if err != nil {
		return err
	}
	if !l.rw {
		passed, r, err := l.d.releaseMutex(ctx, l.name, l.keys, g, h)
		if passed {
			return nil
		}
		return finish(l.what(), l.name, h, r, err)
	}
	h.keeper.Stop()
	excl := ""
	if h.excl {
		excl = "w"
	}
	r, err := scriptLockRelease.Run(ctx, l.d.c, l.keys, h.id, excl).Int64()
	return finish(l.what(), l.name, h, r, err)
}

func (l *lockDriver) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	if !l.rw {
		return driver.Grant{}, fmt.Errorf("redislock: mutex %q: downgrade: %w", l.name, baton.ErrUnsupported)
	}
	h, err := holdOf(g)
	if err != nil {
		return driver.Grant{}, err
	}
	if e := h.loss.Err(); e != nil {
		return driver.Grant{}, fmt.Errorf("redislock: rwmutex %q: downgrade: %w", l.name, e)
	}
	ok, tok, err := pair(scriptLockDowngrade.Run(ctx, l.d.c, l.keys, h.id).Result())
	if err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: rwmutex %q: downgrade: %w", l.name, err)
	}
	if !ok {
		h.loss.Fire(errors.New("the server no longer had the hold at downgrade"))
		return driver.Grant{}, fmt.Errorf("redislock: rwmutex %q: downgrade: %w", l.name, baton.ErrLost)
	}
	h.excl = false
	g.Token = uint64(tok)
	return g, nil
}

func (l *lockDriver) Close() error { return nil }
