package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// rwDriver serves one RWMutex handle with the lock_*.lua scripts, whose
// holders are a sorted set (see lock_common.lua). The core calls it one
// operation at a time, so it has no mutex of its own.
type rwDriver struct{ queued }

var _ driver.Lock = (*rwDriver)(nil)

var rwKind = &lockKind{
	acquire: scriptLockAcquire, poll: scriptLockPoll, cancel: scriptLockCancel,
	renew: scriptRenew, renewKeys: 2, release: scriptLockRelease,
	args: func(d *backend, id string, mode driver.Mode, ch string, _ time.Time) []any {
		m := "w"
		if mode == driver.Shared {
			m = "r"
		}
		return []any{id, m, d.ttlMS(), d.meta, ch}
	},
	releaseArgs: func(h *hold) []any {
		excl := ""
		if h.excl {
			excl = "w"
		}
		return []any{h.id, excl}
	},
}

func (l *rwDriver) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	h, err := holdOf(g)
	if err != nil {
		return driver.Grant{}, err
	}
	if e := h.loss.Err(); e != nil {
		return driver.Grant{}, fmt.Errorf("downgrade: %w", e)
	}
	ok, tok, err := pair(scriptLockDowngrade.Run(ctx, l.d.c, l.keys.all(), h.id).Result())
	if err != nil {
		return driver.Grant{}, fmt.Errorf("downgrade: %w", err)
	}
	if !ok {
		h.loss.Fire(errors.New("the server no longer had the hold at downgrade"))
		return driver.Grant{}, fmt.Errorf("downgrade: %w", baton.ErrLost)
	}
	h.excl = false
	g.Token = uint64(tok)
	return g, nil
}
