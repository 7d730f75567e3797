package lease

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/batonlock/baton/driver"
)

// RenewFunc renews a lease once. It returns the time at which it sent the
// request that renewed the lease (a lower bound of the server's receipt), or
// an error. An error matching baton.ErrLost says that the server no longer
// holds the lease (it expired, or the key was removed): the keeper fires the
// loss at once. Any other error is retried until the deadline.
type RenewFunc func(ctx context.Context) (sent time.Time, err error)

// Keeper renews the lease of one hold in the background and fires its
// Loss when the lease can no longer be trusted: a Session with one hold
// and a Renewal driven by a RenewFunc. Create it with StartKeeper; the
// zero value is not usable.
type Keeper struct {
	s Session[struct{}]

	mu   sync.Mutex
	loss *driver.Loss // guarded by mu: the hold's Loss (Pass replaces it)
}

// StartKeeper starts renewing a lease acquired by a request sent at sent,
// with the timing of c (from Build; it must not change while the keeper
// runs). The first renewal is due at sent + RenewEvery (at once if that has
// passed). The keeper fires loss (with the cause) when renewals fail until
// the deadline, or when the server reports the lease gone. Background
// failures go to c.Logger at Warn, its successful renewals at Debug, with
// name (the lock's) as an attribute.
func StartKeeper(sent time.Time, c *Config, renew RenewFunc, loss *driver.Loss, name string) *Keeper {
	k := &Keeper{loss: loss}
	k.s.start(c.Deadline(sent), SessionConfig{
		Logger: c.Logger, Subject: "lease", Attr: slog.String("name", name), TTL: c.TTL,
		Renewal: Renewal{
			First: sent.Add(c.RenewEvery), Every: c.RenewEvery, Timeout: c.RequestTimeout, RetryFloor: time.Millisecond,
			Renew: func(ctx context.Context, _ time.Time) (time.Time, error) {
				sent, err := renew(ctx)
				return c.Deadline(sent), err
			},
		},
	})
	k.s.Track(loss, struct{}{})
	return k
}

// Deadline returns the current local deadline of the lease.
func (k *Keeper) Deadline() time.Time { return k.s.Deadline() }

// Stop ends renewal and waits until a renewal in flight has returned. It
// does not fire the loss unless the deadline has already passed; it takes
// the deadline off the loss, so that a hold given back is not reported lost
// later. Stop is idempotent.
func (k *Keeper) Stop() { k.s.Stop() }

// Pass makes loss the one fired when the lease is lost, for a holder that
// hands its lease to another hold of its own (the previous loss then never
// fires; its deadline is taken off). It reports false and changes nothing
// when the lease is already lost, its deadline has passed, or the keeper
// stopped.
func (k *Keeper) Pass(loss *driver.Loss) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.s.Pass(k.loss, loss, 0) {
		return false
	}
	k.loss = loss
	return true
}
