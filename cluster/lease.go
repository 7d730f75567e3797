// Package cluster holds what the network backends of baton share: lease
// options with their defaults and validation, and the lease keeper that
// renews a hold in the background and announces its loss.
//
// A lease is trusted until its deadline: the local monotonic time at which the
// request that last set the lease on the server was sent, plus the TTL, minus
// a drift margin. The server starts its own TTL when it receives the request,
// which is later, so the local deadline passes before the server can give the
// lock to anyone else, as long as the two clocks advance at rates that
// differ by less than the drift margin over one TTL.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Defaults of LeaseOptions.
const (
	DefaultTTL = 10 * time.Second
	// DefaultRenewDivisor: the renewal period defaults to TTL/3, so that two
	// renewals can fail before the lease is lost.
	DefaultRenewDivisor = 3
	// DefaultDriftFactor and DefaultDriftMin give the drift margin default:
	// 1% of the TTL plus 2 ms (clock rate differences and scheduling delay).
	DefaultDriftFactor = 0.01
	DefaultDriftMin    = 2 * time.Millisecond
)

// LeaseOptions are the timing parameters of a lease. The zero value asks for
// every default.
type LeaseOptions struct {
	// TTL is the lease time given to the server on every acquisition and
	// renewal. Default DefaultTTL; at least 10 ms.
	TTL time.Duration
	// RenewEvery is the period of background renewal. Default TTL/3; must
	// satisfy TTL >= 2*RenewEvery.
	RenewEvery time.Duration
	// Drift is subtracted from the local deadline. Default 1% of TTL + 2 ms;
	// must be >= 0 and less than TTL - RenewEvery.
	Drift time.Duration
}

// Normalize fills defaults and validates the combination. The error matches
// baton.ErrInvalidArgument; o is unchanged on error.
func (o *LeaseOptions) Normalize() error {
	n := *o
	if n.TTL == 0 {
		n.TTL = DefaultTTL
	}
	if n.TTL < 10*time.Millisecond {
		return fmt.Errorf("%w: lease TTL %v, must be >= 10ms", baton.ErrInvalidArgument, n.TTL)
	}
	if n.RenewEvery == 0 {
		n.RenewEvery = n.TTL / DefaultRenewDivisor
	}
	if n.RenewEvery < 0 {
		return fmt.Errorf("%w: renewal period %v, must be > 0", baton.ErrInvalidArgument, n.RenewEvery)
	}
	if n.TTL < 2*n.RenewEvery {
		return fmt.Errorf("%w: lease TTL %v is shorter than twice the renewal period %v", baton.ErrInvalidArgument, n.TTL, n.RenewEvery)
	}
	if n.Drift == 0 {
		n.Drift = DefaultDrift(n.TTL)
	}
	if n.Drift < 0 {
		return fmt.Errorf("%w: drift margin %v, must be >= 0", baton.ErrInvalidArgument, n.Drift)
	}
	if n.Drift >= n.TTL-n.RenewEvery {
		return fmt.Errorf("%w: drift margin %v leaves no time to renew a lease of %v every %v", baton.ErrInvalidArgument, n.Drift, n.TTL, n.RenewEvery)
	}
	*o = n
	return nil
}

// DefaultDrift returns the default drift margin for a TTL.
func DefaultDrift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*DefaultDriftFactor) + DefaultDriftMin
}

// Deadline returns the local time until which a lease set by a request sent
// at sent can be trusted.
func (o LeaseOptions) Deadline(sent time.Time) time.Time {
	return sent.Add(o.TTL - o.Drift)
}

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
	opts  LeaseOptions
	renew RenewFunc
	log   *slog.Logger

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

// StartKeeper starts renewing a lease acquired by a request sent at sent.
// opts must be normalized. The first renewal is due at sent + RenewEvery
// (at once if that has passed). The keeper fires loss (with the cause) when
// renewals fail until the deadline, or when the server reports the lease
// gone. log receives background failures; nil means slog.Default.
func StartKeeper(sent time.Time, opts LeaseOptions, renew RenewFunc, loss *driver.Loss, log *slog.Logger) *Keeper {
	k := &Keeper{opts: opts, renew: renew, loss: loss, log: log, deadline: opts.Deadline(sent)}
	loss.SetDeadline(k.deadline)
	k.mu.Lock()
	k.next = time.AfterFunc(max(0, time.Until(sent.Add(opts.RenewEvery))), k.tick)
	k.expire = time.AfterFunc(time.Until(k.deadline), k.expired)
	k.mu.Unlock()
	return k
}

func (k *Keeper) logger() *slog.Logger {
	if k.log == nil {
		return slog.Default()
	}
	return k.log
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
	k.logger().Warn("baton: lease lost", "err", cause)
	loss.Fire(cause)
}

// tick sends one renewal and schedules the next.
func (k *Keeper) tick() {
	k.mu.Lock()
	if k.stopped || k.inflight != nil {
		k.mu.Unlock()
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), k.deadline)
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
		if dl := k.opts.Deadline(sent); dl.After(k.deadline) {
			// SetDeadline fires the loss instead if the old deadline has
			// passed meanwhile: a hold read as lost stays lost.
			k.deadline = dl
			k.loss.SetDeadline(dl)
			k.expire.Reset(time.Until(dl))
		}
		k.next.Reset(k.opts.RenewEvery)
	case errors.Is(err, baton.ErrLost):
		k.stopped = true
		k.next.Stop()
		k.expire.Stop()
		k.logger().Warn("baton: lease lost", "err", err)
		k.loss.Fire(err)
	default:
		k.lastErr = err
		k.logger().Warn("baton: lease renewal failed; retrying", "err", err, "deadline_in", time.Until(k.deadline))
		// Retry sooner than the period: the deadline is closer now.
		k.next.Reset(retryDelay(k.opts.RenewEvery))
	}
}

func retryDelay(period time.Duration) time.Duration {
	d := period / 8
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}
