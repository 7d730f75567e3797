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

// The statements that take a lock are in leases.go.
const (
	// $1 key, $2 idle timeout to restore, $3 kind, $4 name, $5 token. A
	// previous holder's lease that still runs (an acquisition given up
	// while waiting it out) is put back; otherwise the row goes, so that a
	// free name keeps none (the token is the sequence's, not the row's; the
	// next holder's upsert waits for the delete's row lock and inserts
	// anew).
	unlockXSQL = `WITH c AS MATERIALIZED (UPDATE baton_leases SET expires = prev_expires
	WHERE kind = $3 AND name = $4 AND n = $5 AND prev_expires > clock_timestamp() RETURNING 1),
d AS MATERIALIZED (DELETE FROM baton_leases
	WHERE kind = $3 AND name = $4 AND n = $5 AND NOT coalesce(prev_expires > clock_timestamp(), false) RETURNING 1),
u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok FROM (SELECT (SELECT count(*) FROM c) + (SELECT count(*) FROM d)) x),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false) FROM u)
SELECT ok FROM u, x`

	// $1 kind, $2 name, $3 token, $4 lease in ms.
	renewSQL = `UPDATE baton_leases SET expires = clock_timestamp() + $4::bigint * interval '1 millisecond'
WHERE kind = $1 AND name = $2 AND n = $3`

	// $1 key, $2 idle timeout to restore, $3 kind, $4 name. The name's row
	// goes unless it keeps a lease that still runs (readers keep none of
	// their own; other readers holding lose nothing by it).
	unlockSSQL = `WITH d AS MATERIALIZED (DELETE FROM baton_leases
	WHERE kind = $3 AND name = $4 AND NOT coalesce(expires > clock_timestamp(), false) RETURNING 1),
u AS MATERIALIZED (SELECT pg_advisory_unlock_shared($1) AS ok FROM (SELECT count(*) FROM d) x),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false) FROM u)
SELECT ok FROM u, x`

	// Taking the shared lock while holding the exclusive one is granted at
	// once (the session's own lock does not conflict, and waiters queue
	// behind it), so no other writer can come between. The lease record
	// goes first, as in a release. $1 key, $2 kind, $3 name, $4 token.
	downgradeSQL = `WITH c AS MATERIALIZED (UPDATE baton_leases SET expires =
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
var statements = []string{schemaSQL, abandonSQL, unlockXSQL, unlockSSQL, renewSQL, downgradeSQL,
	semOpenSQL, semGateSQL, semTryGateSQL, semSlotsSQL, semGrantSQL, semReleaseSQL,
	condPrepareSQL, condRefreshSQL, condWithdrawSQL, condSignalSQL}

// lockDriver serves one Mutex or RWMutex handle.
type lockDriver struct {
	b    *backend
	kind baton.Kind
	name string
	key  int64
	base [4]any // kind, name, key and idle timeout
}

func (b *backend) openLock(ctx context.Context, kind baton.Kind, name string) (*lockDriver, error) {
	if err := b.schema(ctx); err != nil {
		return nil, err
	}
	d := &lockDriver{b: b, kind: kind, name: name, key: b.key(kind, name)}
	d.base = [4]any{string(kind), name, d.key, b.idle}
	return d, nil
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

// args are those of an acquiring statement; the values are boxed once per
// handle, so that an acquisition allocates only the slice.
func (d *lockDriver) args() []any { return []any{d.base[0], d.base[1], d.base[2], d.base[3]} }

// newHold returns the hold of a grant with token tok on c.
func (d *lockDriver) newHold(c *pgxpool.Conn, shared bool, tok int64, prev string) *hold {
	h := &hold{b: d.b, c: c, loss: driver.NewLoss(), shared: shared, prev: prev, tok: tok}
	if !shared {
		h.renew = []any{string(d.kind), d.name, tok, d.b.idle}
	}
	return h
}

// attempt is the result of an acquiring statement: the token (0 when the
// lease table's marker was missing), the idle timeout it replaced, how
// long to wait out a previous lease, and when the statement was sent.
type attempt struct {
	tok, wait int64
	prev      string
	sent      time.Time
}

// begin takes a connection for an acquisition.
func (d *lockDriver) begin(ctx context.Context) (*pgxpool.Conn, *attempt, error) {
	c, err := d.b.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, &attempt{sent: time.Now()}, nil
}

// grant makes the hold of a lock granted on c. When the marker was
// missing, it is put back and the token drawn again first; if that fails,
// c is destroyed, and its session ends with the lock.
func (d *lockDriver) grant(c *pgxpool.Conn, shared bool, a *attempt) (*hold, error) {
	if a.tok == 0 {
		var err error
		if a.tok, a.wait, err = d.remark(c, shared); err != nil {
			destroy(c)
			return nil, err
		}
	}
	return d.newHold(c, shared, a.tok, a.prev), nil
}

func (d *lockDriver) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	q, shared := lockXSQL, mode == driver.Shared
	if shared {
		q = lockSSQL
	}
	for try := 0; ; try++ {
		c, a, err := d.begin(ctx)
		if err != nil {
			return driver.Grant{}, err
		}
		interrupted, err := waitRow(ctx, c, d.b.q(q), d.args(), &a.tok, &a.prev, &a.wait)
		if interrupted {
			if err == nil {
				// Granted as the context ended: give it back properly.
				_ = d.newHold(c, shared, a.tok, a.prev).end(d.unlockSQL(shared), d.unlockArgs(shared, a.prev, a.tok)...)
			} else {
				d.b.abandon(c, a.prev)
			}
			return driver.Grant{}, ctx.Err()
		}
		var h *hold
		if err != nil {
			destroy(c)
		} else {
			h, err = d.grant(c, shared, a)
		}
		if err != nil {
			// A connection of the pool that died with its session (the
			// server restarted): the next one is fresh. Taking the lock
			// again is safe, since the session of a failed statement holds
			// nothing once destroyed.
			if try < 3 && connLost(err) {
				continue
			}
			return driver.Grant{}, err
		}
		if err := h.start(a.sent, d.name); err != nil {
			destroy(c)
			// The session ended while the grant was on its way: take it
			// again.
			if ctx.Err() != nil {
				return driver.Grant{}, ctx.Err()
			}
			continue
		}
		if err := d.outwait(ctx, h, a.wait); err != nil {
			return driver.Grant{}, err
		}
		return driver.Grant{Token: uint64(h.tok), Loss: h.loss, Data: h}, nil
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
		return []any{d.key, prev, d.base[0], d.base[1]}
	}
	return []any{d.base[2], prev, d.base[0], d.base[1], tok}
}

func (d *lockDriver) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	q, shared := tryXSQL, mode == driver.Shared
	if shared {
		q = trySSQL
	}
	c, a, err := d.begin(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	// A try does not wait: it runs to its end, as releases do.
	rctx, cancel := d.b.rctx()
	err = c.QueryRow(rctx, d.b.q(q), d.args()...).Scan(&a.tok, &a.prev, &a.wait)
	if err != nil && connLost(err) {
		destroy(c)
		if c, err = d.b.pool.Acquire(ctx); err != nil {
			cancel()
			return driver.Grant{}, err
		}
		err = c.QueryRow(rctx, d.b.q(q), d.args()...).Scan(&a.tok, &a.prev, &a.wait)
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
	h, err := d.grant(c, shared, a)
	if err != nil {
		return driver.Grant{}, err
	}
	if a.wait > 0 {
		// The previous holder's lease still runs: as taken.
		_ = h.end(d.unlockSQL(h.shared), d.unlockArgs(h.shared, h.prev, h.tok)...)
		return driver.Grant{}, baton.ErrLocked
	}
	if err := h.start(a.sent, d.name); err != nil {
		destroy(c)
		return driver.Grant{}, err
	}
	return driver.Grant{Token: uint64(h.tok), Loss: h.loss, Data: h}, nil
}

func (d *lockDriver) Release(ctx context.Context, g driver.Grant) error {
	h, err := driver.DataOf[hold](g)
	if err != nil {
		return err
	}
	return h.end(d.unlockSQL(h.shared), d.unlockArgs(h.shared, h.prev, h.tok)...)
}

func (d *lockDriver) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	if d.kind != baton.KindRWMutex {
		return driver.Grant{}, baton.ErrUnsupported
	}
	h, err := driver.DataOf[hold](g)
	if err != nil {
		return driver.Grant{}, err
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
