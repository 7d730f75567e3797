package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// An acquisition is one statement: the advisory lock, then (only once it is
// granted, since the CTE is materialised before the INSERT reads it) the
// token drawn from the name's counter row, and the session's idle timeout
// set to the lease. It returns the token and the idle timeout it replaced.
// $1 kind, $2 name, $3 key, $4 idle timeout in ms.
const (
	lockSQL = `WITH l AS MATERIALIZED (SELECT %s($3)::text AS g, current_setting('idle_session_timeout') AS prev,
	set_config('idle_session_timeout', $4, false) AS s)
INSERT INTO baton_tokens AS t (kind, name, n) SELECT $1, $2, 1 FROM l
ON CONFLICT (kind, name) DO UPDATE SET n = t.n + 1 RETURNING t.n, (SELECT prev FROM l)`

	// A try sets the idle timeout only when it took the lock.
	tryLockSQL = `WITH l AS MATERIALIZED (SELECT %s($3) AS ok, current_setting('idle_session_timeout') AS prev),
s AS MATERIALIZED (SELECT set_config('idle_session_timeout', CASE WHEN ok THEN $4 ELSE prev END, false) FROM l)
INSERT INTO baton_tokens AS t (kind, name, n) SELECT $1, $2, 1 FROM l, s WHERE l.ok
ON CONFLICT (kind, name) DO UPDATE SET n = t.n + 1 RETURNING t.n, (SELECT prev FROM l)`

	unlockSQL = `WITH u AS MATERIALIZED (SELECT %s($1) AS ok),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false) FROM u)
SELECT ok FROM u, x`

	// Taking the shared lock while holding the exclusive one is granted at
	// once (the session's own lock does not conflict, and waiters queue
	// behind it), so no other writer can come between.
	downgradeSQL = `WITH s AS MATERIALIZED (SELECT pg_advisory_lock_shared($1)::text)
SELECT pg_advisory_unlock($1) FROM s`
)

var (
	lockX     = fmt.Sprintf(lockSQL, "pg_advisory_lock")
	lockS     = fmt.Sprintf(lockSQL, "pg_advisory_lock_shared")
	tryX      = fmt.Sprintf(tryLockSQL, "pg_try_advisory_lock")
	tryS      = fmt.Sprintf(tryLockSQL, "pg_try_advisory_lock_shared")
	unlockX   = fmt.Sprintf(unlockSQL, "pg_advisory_unlock")
	unlockS   = fmt.Sprintf(unlockSQL, "pg_advisory_unlock_shared")
	rawLock   = "SELECT pg_advisory_lock($1)"
	rawUnlock = "SELECT pg_advisory_unlock($1)"
)

// statements lists every statement, for the backend to put its prefix in.
var statements = []string{schemaSQL, abandonSQL, lockX, lockS, tryX, tryS, unlockX, unlockS, downgradeSQL,
	semOpenSQL, semGateSQL, semTryGateSQL, semSlotsSQL, semGrantSQL, semReleaseSQL,
	condPrepareSQL, condRefreshSQL, condWithdrawSQL, condSignalSQL}

// lockDriver serves one Mutex or RWMutex handle.
type lockDriver struct {
	b    *backend
	kind baton.Kind
	name string
	key  int64
}

func (b *backend) openLock(ctx context.Context, kind baton.Kind, name string) (*lockDriver, error) {
	if err := b.schema(ctx); err != nil {
		return nil, err
	}
	return &lockDriver{b: b, kind: kind, name: name, key: b.key(kind, name)}, nil
}

func (b *backend) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return b.openLock(ctx, baton.KindMutex, name)
}

func (b *backend) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return b.openLock(ctx, baton.KindRWMutex, name)
}

func (d *lockDriver) args() []any {
	return []any{string(d.kind), d.name, d.key, d.b.idle}
}

func (d *lockDriver) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	q := lockX
	if mode == driver.Shared {
		q = lockS
	}
	for attempt := 0; ; attempt++ {
		c, err := d.b.pool.Acquire(ctx)
		if err != nil {
			return driver.Grant{}, err
		}
		h := &hold{b: d.b, c: c, loss: driver.NewLoss(), shared: mode == driver.Shared}
		var tok int64
		sent := time.Now()
		interrupted, err := waitRow(ctx, c, d.b.q(q), d.args(), &tok, &h.prev)
		if interrupted {
			d.b.abandon(c, h.prev)
			return driver.Grant{}, ctx.Err()
		}
		if err != nil {
			destroy(c)
			// A connection of the pool that died with its session (the
			// server restarted): the next one is fresh. Taking the lock
			// again is safe, since the session of a failed statement holds
			// nothing once destroyed.
			if attempt < 3 && connLost(err) {
				continue
			}
			return driver.Grant{}, err
		}
		if err := h.start(sent, d.name); err != nil {
			destroy(c)
			// The session ended while the grant was on its way: take it
			// again.
			if ctx.Err() != nil {
				return driver.Grant{}, ctx.Err()
			}
			continue
		}
		return driver.Grant{Token: uint64(tok), Loss: h.loss, Data: h}, nil
	}
}

func (d *lockDriver) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	q := tryX
	if mode == driver.Shared {
		q = tryS
	}
	c, err := d.b.pool.Acquire(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	h := &hold{b: d.b, c: c, loss: driver.NewLoss(), shared: mode == driver.Shared}
	var tok int64
	sent := time.Now()
	// A try does not wait: it runs to its end, as releases do.
	rctx, cancel := d.b.rctx()
	err = c.QueryRow(rctx, d.b.q(q), d.args()...).Scan(&tok, &h.prev)
	if err != nil && connLost(err) {
		destroy(c)
		if c, err = d.b.pool.Acquire(ctx); err != nil {
			cancel()
			return driver.Grant{}, err
		}
		h.c = c
		err = c.QueryRow(rctx, d.b.q(q), d.args()...).Scan(&tok, &h.prev)
	}
	cancel()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		c.Release()
		return driver.Grant{}, baton.ErrLocked
	case err != nil:
		destroy(c)
		return driver.Grant{}, err
	}
	if err := h.start(sent, d.name); err != nil {
		destroy(c)
		return driver.Grant{}, err
	}
	return driver.Grant{Token: uint64(tok), Loss: h.loss, Data: h}, nil
}

func (d *lockDriver) Release(ctx context.Context, g driver.Grant) error {
	h, ok := g.Data.(*hold)
	if !ok {
		return fmt.Errorf("foreign grant: %w", baton.ErrNotHeld)
	}
	q := unlockX
	if h.shared {
		q = unlockS
	}
	return h.end(q, d.key, h.prev)
}

func (d *lockDriver) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	if d.kind != baton.KindRWMutex {
		return driver.Grant{}, baton.ErrUnsupported
	}
	h, ok := g.Data.(*hold)
	if !ok {
		return driver.Grant{}, fmt.Errorf("foreign grant: %w", baton.ErrNotHeld)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loss.Err(); err != nil {
		return driver.Grant{}, err
	}
	rctx, cancel := d.b.rctx()
	defer cancel()
	var released bool
	if err := h.c.QueryRow(rctx, d.b.q(downgradeSQL), d.key).Scan(&released); err != nil {
		// The connection is closed: its session and both locks go with it.
		h.loss.Fire(fmt.Errorf("downgrade: %w", err))
		return driver.Grant{}, h.loss.Err()
	}
	if !released {
		h.loss.Fire(errors.New("the server no longer had the write lock"))
		return driver.Grant{}, h.loss.Err()
	}
	h.shared = true
	return g, nil
}

func (d *lockDriver) Close() error { return nil }
