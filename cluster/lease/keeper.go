package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// RenewFunc renews a lease once. It returns the time at which it sent the
// request that renewed the lease (a lower bound of the server's receipt), or
// an error. An error matching baton.ErrLost says that the server no longer
// holds the lease (it expired, or the key was removed): the keeper fires the
// loss at once. Any other error is retried until the deadline.
type RenewFunc func(ctx context.Context) (sent time.Time, err error)

// Keeper renews one lease in the background and fires its Loss when the
// lease can no longer be trusted. Create it with StartKeeper; the zero value
// is not usable.
//
// A keeper runs no goroutine between renewals: renewals and the expiry run
// from timers, so that starting and stopping a keeper around a short hold
// costs no scheduling. Timers can run late (the process was paused), so the
// keeper also gives the lease deadline to the Loss (driver.Loss.SetDeadline)
// whenever it changes: every read of the hold's Err or Lost compares it with
// the monotonic clock and fires the loss on the spot once it has passed.
type Keeper struct {
	c     *Config
	renew RenewFunc
	name  string // for the log

	mu       sync.Mutex
	loss     *driver.Loss       // guarded by mu: fired when the lease is lost
	deadline time.Time          // guarded by mu: local deadline of the lease
	stopped  bool               // guarded by mu: Stop was called or the loss fired
	next     *time.Timer        // guarded by mu: the next renewal
	expire   *time.Timer        // guarded by mu: fires the loss at the deadline
	inflight chan struct{}      // guarded by mu: closed when the renewal in flight returns; nil when none
	cancel   context.CancelFunc // guarded by mu: ends the renewal in flight
	lastErr  error              // guarded by mu: error of the last failed renewal
}

// StartKeeper starts renewing a lease acquired by a request sent at sent,
// with the timing of c (from Build; it must not change while the keeper
// runs). The first renewal is due at sent + RenewEvery (at once if that has
// passed). The keeper fires loss (with the cause) when renewals fail until
// the deadline, or when the server reports the lease gone. Background
// failures go to c.Logger at Warn, its successful renewals at Debug, with
// name (the lock's) as an attribute.
func StartKeeper(sent time.Time, c *Config, renew RenewFunc, loss *driver.Loss, name string) *Keeper {
	k := &Keeper{c: c, renew: renew, loss: loss, name: name, deadline: c.Deadline(sent)}
	loss.SetDeadline(k.deadline)
	k.mu.Lock()
	k.next = time.AfterFunc(max(0, time.Until(sent.Add(c.RenewEvery))), k.tick)
	k.expire = time.AfterFunc(time.Until(k.deadline), k.expired)
	k.mu.Unlock()
	return k
}

// Deadline returns the current local deadline of the lease.
func (k *Keeper) Deadline() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.deadline
}

// Stop ends renewal and waits until a renewal in flight has returned. It
// does not fire the loss unless the deadline has already passed; it takes
// the deadline off the loss, so that a hold given back is not reported lost
// later. Stop is idempotent.
func (k *Keeper) Stop() {
	k.mu.Lock()
	if !k.stopped {
		k.loss.SetDeadline(time.Time{})
	}
	k.stopped = true
	k.next.Stop()
	k.expire.Stop()
	wait := k.inflight
	if k.cancel != nil {
		k.cancel()
	}
	k.mu.Unlock()
	if wait != nil {
		<-wait
	}
}

// Pass makes loss the one fired when the lease is lost, for a holder that
// hands its lease to another hold of its own (the previous loss then never
// fires; its deadline is taken off). It reports false and changes nothing
// when the lease is already lost, its deadline has passed, or the keeper
// stopped.
func (k *Keeper) Pass(loss *driver.Loss) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped || !time.Now().Before(k.deadline) {
		return false
	}
	loss.SetDeadline(k.deadline)
	k.loss.SetDeadline(time.Time{})
	k.loss = loss
	return true
}

// expired fires the loss when the deadline has passed without a renewal.
func (k *Keeper) expired() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	if d := time.Until(k.deadline); d > 0 {
		// A renewal moved the deadline after this timer was due.
		k.expire.Reset(d)
		k.mu.Unlock()
		return
	}
	k.stopped = true
	k.next.Stop()
	if k.cancel != nil {
		// A renewal in flight may hang until its own deadline; end it.
		k.cancel()
	}
	cause, loss := k.lastErr, k.loss
	k.mu.Unlock()
	if cause == nil {
		cause = errors.New("lease deadline passed before renewal succeeded")
	} else {
		cause = fmt.Errorf("lease deadline passed; last renewal error: %w", cause)
	}
	k.c.Logger.Warn("baton: lease lost", "name", k.name, "err", cause)
	loss.Fire(cause)
}

// tick sends one renewal and schedules the next.
func (k *Keeper) tick() {
	k.mu.Lock()
	if k.stopped || k.inflight != nil {
		k.mu.Unlock()
		return
	}
	// A renewal answered after the deadline is of no use.
	dl := time.Now().Add(k.c.RequestTimeout)
	if k.deadline.Before(dl) {
		dl = k.deadline
	}
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	done := make(chan struct{})
	k.inflight, k.cancel = done, cancel
	k.mu.Unlock()

	sent, err := k.renew(ctx)
	cancel()

	k.mu.Lock()
	defer k.mu.Unlock()
	k.inflight, k.cancel = nil, nil
	close(done)
	if k.stopped {
		return
	}
	switch {
	case err == nil:
		k.lastErr = nil
		k.c.Logger.Debug("baton: lease renewed", "name", k.name, "ttl", k.c.TTL)
		if dl := k.c.Deadline(sent); dl.After(k.deadline) {
			// SetDeadline fires the loss instead if the old deadline has
			// passed meanwhile: a hold read as lost stays lost.
			k.deadline = dl
			k.loss.SetDeadline(dl)
			k.expire.Reset(time.Until(dl))
		}
		k.next.Reset(k.c.RenewEvery)
	case errors.Is(err, baton.ErrLost):
		k.stopped = true
		k.next.Stop()
		k.expire.Stop()
		k.c.Logger.Warn("baton: lease lost", "name", k.name, "err", err)
		k.loss.Fire(err)
	default:
		k.lastErr = err
		k.c.Logger.Warn("baton: lease renewal failed; retrying", "name", k.name, "err", err, "deadline_in", time.Until(k.deadline))
		// Retry sooner than the period: the deadline is closer now.
		k.next.Reset(retryDelay(k.c.RenewEvery))
	}
}

func retryDelay(period time.Duration) time.Duration {
	d := period / 8
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}
