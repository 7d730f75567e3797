package redislock

import (
	"context"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// mutexDriver serves one Mutex handle with the mutex_*.lua scripts, whose
// hold is one key (see mutex_common.lua). The core calls it one operation
// at a time, so it has no mutex of its own.
type mutexDriver struct{ queued }

var (
	_ driver.Lock   = (*mutexDriver)(nil)
	_ driver.Passer = (*mutexDriver)(nil)
)

var mutexKind = &lockKind{
	acquire: scriptMutexAcquire, poll: scriptMutexPoll, cancel: scriptMutexCancel,
	renew: scriptMutexRenew, renewKeys: 1, release: scriptMutexRelease,
	args: func(d *backend, id string, _ driver.Mode, ch string, now time.Time) []any {
		var wake any = ""
		if ch != "" {
			wake = d.wakeArg
		}
		return []any{id, d.ttlArg, d.metaArg, now.UnixMilli(), wake}
	},
	releaseArgs: func(h *hold) []any { return []any{h.id} },
}

// passTokens is how many times a hold can be passed among the handles of a
// Backend: the tokens the server reserves above each acquisition's own
// (next_token in mutex_common.lua advances the counter by passTokens+1).
const passTokens = 15

// Pass hands the hold of g to another handle of the Backend (the core's
// handoff, driver.Passer): the server knows the hold by its id, which any
// handle of the name can release or renew. The new grant takes the next of
// the tokens reserved above the server's, and a Loss of its own that the
// keeper fires from now on. A hold whose lease is older than a renewal
// period (a renewal is late: the server is paused or unreachable) is not
// passed; it goes back to the server, where the next handle acquires a
// lease of its own (see fresh).
func (m *mutexDriver) Pass(g driver.Grant) (driver.Grant, bool) {
	h, err := holdOf(g)
	if err != nil || !h.excl || h.passes >= passTokens || h.loss.Err() != nil {
		return driver.Grant{}, false
	}
	if !m.d.fresh(h.keeper.Deadline().Add(m.d.o.Drift - m.d.o.TTL)) {
		return driver.Grant{}, false
	}
	nh := &hold{id: h.id, keys: h.keys, keeper: h.keeper, loss: driver.NewLoss(), excl: true, passes: h.passes + 1}
	if !h.keeper.Pass(nh.loss) {
		return driver.Grant{}, false // lost: the release on the server says so
	}
	return driver.Grant{Token: g.Token + 1, Loss: nh.loss, Data: nh}, true
}

func (m *mutexDriver) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, baton.ErrUnsupported
}
