package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// An acquisition is one statement: the advisory lock, then (only once it is
// granted, since the CTE is materialised before the INSERT reads it) the
// token drawn from the name's counter row, and the session's idle timeout
// set to the lease. It returns the token and the idle timeout it replaced.
// $1 kind, $2 name, $3 key, $4 idle timeout in ms.
const (
	// An exclusive acquisition also records, on the counter row, until when
	// the hold's lease runs (expires, server time, pushed back by every
	// renewal and cleared by the release) and the previous holder's
	// (prev_expires). A holder whose session ended without a release (it
	// was terminated, the server restarted) leaves its lease there; the
	// next holder waits it out before Lock returns, so that the old
	// holder's Loss has fired by then. The release clears expires before
	// it unlocks and commits after: the next holder's upsert waits for the
	// row lock, so it reads the cleared value.
	// $1 kind, $2 name, $3 key, $4 idle timeout and lease in ms, $5 how
	// far the counter moves (a Mutex reserves tokens to pass). Returns
	// the token, the idle timeout replaced, and how long the previous
	// holder's lease still runs, in ms.
	lockXSQL = `WITH l AS MATERIALIZED (SELECT pg_advisory_lock($3)::text AS g, current_setting('idle_session_timeout') AS prev,
	set_config('idle_session_timeout', $4, false) AS s),
u AS (INSERT INTO baton_tokens AS t (kind, name, n, expires)
	SELECT $1, $2, 1, clock_timestamp() + $4::bigint * interval '1 millisecond' FROM l
	ON CONFLICT (kind, name) DO UPDATE SET n = t.n + $5::bigint, expires = EXCLUDED.expires, prev_expires = t.expires
	RETURNING t.n, t.prev_expires)
SELECT u.n, l.prev, coalesce(ceil(extract(epoch FROM u.prev_expires - clock_timestamp()) * 1000), 0)::bigint FROM u, l`

	tryXSQL = `WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($3) AS ok, current_setting('idle_session_timeout') AS prev),
s AS MATERIALIZED (SELECT set_config('idle_session_timeout', CASE WHEN ok THEN $4 ELSE prev END, false) FROM l),
u AS (INSERT INTO baton_tokens AS t (kind, name, n, expires)
	SELECT $1, $2, 1, clock_timestamp() + $4::bigint * interval '1 millisecond' FROM l, s WHERE l.ok
	ON CONFLICT (kind, name) DO UPDATE SET n = t.n + $5::bigint, expires = EXCLUDED.expires, prev_expires = t.expires
	RETURNING t.n, t.prev_expires)
SELECT u.n, l.prev, coalesce(ceil(extract(epoch FROM u.prev_expires - clock_timestamp()) * 1000), 0)::bigint FROM u, l`

	// $1 key, $2 idle timeout to restore, $3 kind, $4 name, $5 token. A
	// previous holder's lease that still runs (an acquisition given up
	// while waiting it out) is put back. The commit need not wait for the
	// disk: a clear lost in a crash leaves a lease that the next holder
	// waits out, which is safe.
	unlockXSQL = `WITH c AS MATERIALIZED (UPDATE baton_tokens SET expires =
	CASE WHEN prev_expires > clock_timestamp() THEN prev_expires END
	WHERE kind = $3 AND name = $4 AND n = $5 RETURNING 1),
u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok FROM (SELECT count(*) FROM c) x),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false),
	set_config('synchronous_commit', 'off', true) FROM u)
SELECT ok FROM u, x`

	// $1 kind, $2 name, $3 token, $4 lease in ms.
	renewSQL = `UPDATE baton_tokens SET expires = clock_timestamp() + $4::bigint * interval '1 millisecond'
WHERE kind = $1 AND name = $2 AND n = $3`

	// Readers record no lease of their own, but wait out a writer's that
	// was not released, as writers do.
	lockSSQL = `WITH l AS MATERIALIZED (SELECT pg_advisory_lock_shared($3)::text AS g, current_setting('idle_session_timeout') AS prev,
	set_config('idle_session_timeout', $4, false) AS s)
INSERT INTO baton_tokens AS t (kind, name, n) SELECT $1, $2, 1 FROM l
ON CONFLICT (kind, name) DO UPDATE SET n = t.n + 1
RETURNING t.n, (SELECT prev FROM l), coalesce(ceil(extract(epoch FROM t.expires - clock_timestamp()) * 1000), 0)::bigint`

	trySSQL = `WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock_shared($3) AS ok, current_setting('idle_session_timeout') AS prev),
s AS MATERIALIZED (SELECT set_config('idle_session_timeout', CASE WHEN ok THEN $4 ELSE prev END, false) FROM l)
INSERT INTO baton_tokens AS t (kind, name, n) SELECT $1, $2, 1 FROM l, s WHERE l.ok
ON CONFLICT (kind, name) DO UPDATE SET n = t.n + 1
RETURNING t.n, (SELECT prev FROM l), coalesce(ceil(extract(epoch FROM t.expires - clock_timestamp()) * 1000), 0)::bigint`

	unlockSSQL = `WITH u AS MATERIALIZED (SELECT pg_advisory_unlock_shared($1) AS ok),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false) FROM u)
SELECT ok FROM u, x`

	// Taking the shared lock while holding the exclusive one is granted at
	// once (the session's own lock does not conflict, and waiters queue
	// behind it), so no other writer can come between. The lease record
	// goes first, as in a release. $1 key, $2 kind, $3 name, $4 token.
	downgradeSQL = `WITH c AS MATERIALIZED (UPDATE baton_tokens SET expires =
	CASE WHEN prev_expires > clock_timestamp() THEN prev_expires END
	WHERE kind = $2 AND name = $3 AND n = $4 RETURNING 1),
s AS MATERIALIZED (SELECT pg_advisory_lock_shared($1)::text FROM (SELECT count(*) FROM c) x)
SELECT pg_advisory_unlock($1) FROM s`
)

var (
	rawLock   = "SELECT pg_advisory_lock($1)"
	rawUnlock = "SELECT pg_advisory_unlock($1)"
)

// statements lists every statement, for the backend to put its prefix in.
var statements = []string{schemaSQL, abandonSQL, lockXSQL, lockSSQL, tryXSQL, trySSQL, unlockXSQL, unlockSSQL, renewSQL, downgradeSQL,
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
	d, err := b.openLock(ctx, baton.KindMutex, name)
	if err != nil {
		return nil, err
	}
	return &mutexDriver{d}, nil
}

func (b *backend) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return b.openLock(ctx, baton.KindRWMutex, name)
}

func (d *lockDriver) args(shared bool) []any {
	if shared {
		return []any{string(d.kind), d.name, d.key, d.b.idle}
	}
	step := int64(1)
	if d.kind == baton.KindMutex {
		step = passTokens + 1
	}
	return []any{string(d.kind), d.name, d.key, d.b.idle, step}
}

// newHold returns the hold of a grant with token tok on c.
func (d *lockDriver) newHold(c *pgxpool.Conn, shared bool, tok int64, prev string) *hold {
	h := &hold{b: d.b, c: c, loss: driver.NewLoss(), shared: shared, prev: prev, tok: tok}
	if !shared {
		h.renew = []any{string(d.kind), d.name, tok, d.b.idle}
	}
	return h
}

func (d *lockDriver) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	q := lockXSQL
	if mode == driver.Shared {
		q = lockSSQL
	}
	for attempt := 0; ; attempt++ {
		c, err := d.b.pool.Acquire(ctx)
		if err != nil {
			return driver.Grant{}, err
		}
		var tok, wait int64
		var prev string
		sent := time.Now()
		interrupted, err := waitRow(ctx, c, d.b.q(q), d.args(mode == driver.Shared), &tok, &prev, &wait)
		if interrupted {
			if err == nil && tok != 0 {
				// Granted as the context ended: give it back properly.
				_ = d.newHold(c, mode == driver.Shared, tok, prev).end(d.unlockSQL(mode == driver.Shared), d.unlockArgs(mode == driver.Shared, prev, tok)...)
			} else {
				d.b.abandon(c, prev)
			}
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
		h := d.newHold(c, mode == driver.Shared, tok, prev)
		if err := h.start(sent, d.name); err != nil {
			destroy(c)
			// The session ended while the grant was on its way: take it
			// again.
			if ctx.Err() != nil {
				return driver.Grant{}, ctx.Err()
			}
			continue
		}
		if err := d.outwait(ctx, h, wait); err != nil {
			return driver.Grant{}, err
		}
		return driver.Grant{Token: uint64(tok), Loss: h.loss, Data: h}, nil
	}
}

// outwait waits out the lease of a previous holder that did not release
// (wait ms, by the server's clock), keeping the new hold's lease meanwhile.
// When ctx ends or the hold is lost first, the hold is given back (with
// the previous lease put back) and the error returned.
func (d *lockDriver) outwait(ctx context.Context, h *hold, wait int64) error {
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(wait)*time.Millisecond + time.Millisecond)
	defer t.Stop()
	var err error
	select {
	case <-t.C:
		if err = h.loss.Err(); err == nil {
			return nil
		}
	case <-ctx.Done():
		err = ctx.Err()
	case <-h.loss.Done():
		err = h.loss.Err()
	}
	_ = h.end(d.unlockSQL(h.shared), d.unlockArgs(h.shared, h.prev, h.tok)...)
	return err
}

func (d *lockDriver) unlockSQL(shared bool) string {
	if shared {
		return unlockSSQL
	}
	return unlockXSQL
}

func (d *lockDriver) unlockArgs(shared bool, prev string, tok int64) []any {
	if shared {
		return []any{d.key, prev}
	}
	return []any{d.key, prev, string(d.kind), d.name, tok}
}

func (d *lockDriver) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	q := tryXSQL
	if mode == driver.Shared {
		q = trySSQL
	}
	c, err := d.b.pool.Acquire(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	var tok, wait int64
	var prev string
	sent := time.Now()
	// A try does not wait: it runs to its end, as releases do.
	rctx, cancel := d.b.rctx()
	err = c.QueryRow(rctx, d.b.q(q), d.args(mode == driver.Shared)...).Scan(&tok, &prev, &wait)
	if err != nil && connLost(err) {
		destroy(c)
		if c, err = d.b.pool.Acquire(ctx); err != nil {
			cancel()
			return driver.Grant{}, err
		}
		err = c.QueryRow(rctx, d.b.q(q), d.args(mode == driver.Shared)...).Scan(&tok, &prev, &wait)
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
	h := d.newHold(c, mode == driver.Shared, tok, prev)
	if wait > 0 {
		// The previous holder's lease still runs: as taken.
		_ = h.end(d.unlockSQL(h.shared), d.unlockArgs(h.shared, prev, tok)...)
		return driver.Grant{}, baton.ErrLocked
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
	return h.end(d.unlockSQL(h.shared), d.unlockArgs(h.shared, h.prev, h.tok)...)
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
	if err := h.c.QueryRow(rctx, d.b.q(downgradeSQL), d.key, string(d.kind), d.name, h.tok).Scan(&released); err != nil {
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
