package pglock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/listing"
)

// The server's lock table (pg_locks) is what says who holds and who waits:
// an advisory lock on a bigint key k shows as classid k>>32, objid the low
// 32 bits, objsubid 1. A holder is named by its session's
// application_name (appname.go) and client address (pg_stat_activity).
const (
	// $1 key. One row per session that holds or waits: pid, granted,
	// exclusive, client address, application name.
	inspectLocksSQL = `SELECT l.pid, l.granted, l.mode = 'ExclusiveLock',
	coalesce(host(a.client_addr), a.client_hostname, ''), coalesce(a.application_name, '')
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = (($1::bigint >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid
ORDER BY l.granted DESC, l.pid`

	// $1 kind, $2 name: the lease row, and how long its lease still
	// runs in ms (an exclusive holder's).
	inspectRowSQL = `SELECT n, coalesce(ceil(extract(epoch FROM expires - clock_timestamp()) * 1000), 0)::bigint
FROM baton_leases WHERE kind = $1 AND name = $2`

	// $1 slot prefix, $2 capacity: the sessions holding slots and how
	// many each, client address, application name.
	inspectSlotsSQL = `SELECT l.pid, count(*), coalesce(max(host(a.client_addr)), max(a.client_hostname), ''),
	coalesce(max(a.application_name), '')
FROM generate_series(0, $2::int - 1) s
JOIN pg_locks l ON l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = ((hashtextextended($1, s) >> 32) & 4294967295)::oid AND l.objid = (hashtextextended($1, s) & 4294967295)::oid
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
GROUP BY l.pid ORDER BY l.pid`

	inspectListSQL = `SELECT kind, name FROM baton_leases WHERE kind IN ('mutex', 'rwmutex')
UNION SELECT 'semaphore', name FROM baton_semaphores
UNION SELECT 'cond', name FROM baton_cond
ORDER BY 1, 2`

	// Remove of a lock: a new token on the row, so that the exclusive
	// holder's next renewal (WHERE n = its token) fails and its Loss
	// fires; the lease left on the row is kept, so that the next holder
	// waits it out as after any session that ended holding.
	removeRowSQL = `UPDATE baton_leases SET n = nextval('baton_token_seq') WHERE kind = $1 AND name = $2 RETURNING n`

	// $1 key: ends the sessions that hold the lock, which frees it; their
	// renewals fail, and their Losses fire. Waiters stay queued.
	terminateSQL = `SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.pid <> pg_backend_pid()
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = (($1::bigint >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid`

	// $1 slot prefix, $2 capacity: ends the sessions that hold slots.
	terminateSlotsSQL = `SELECT count(pg_terminate_backend(l.pid)) FROM generate_series(0, $2::int - 1) s
JOIN pg_locks l ON l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.pid <> pg_backend_pid()
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = ((hashtextextended($1, s) >> 32) & 4294967295)::oid AND l.objid = (hashtextextended($1, s) & 4294967295)::oid`

	inspectCondSQL  = `SELECT count(*) FROM baton_cond WHERE name = $1 AND expires > now()`
	inspectCapSQL   = `SELECT capacity FROM baton_semaphores WHERE name = $1`
	inspectTokenSQL = `SELECT n FROM baton_tokens WHERE kind = $1 AND name = $2`
	removeSemSQL    = `DELETE FROM baton_semaphores WHERE name = $1 RETURNING capacity`
	removeCondSQL   = `WITH d AS (DELETE FROM baton_cond WHERE name = $1 RETURNING id)
SELECT count(pg_notify('` + channel + `', 'c/' || id)) FROM d`
)

func init() {
	statements = append(statements, inspectLocksSQL, inspectRowSQL, inspectSlotsSQL, inspectListSQL,
		removeRowSQL, terminateSQL, terminateSlotsSQL, inspectCondSQL, inspectCapSQL, inspectTokenSQL, removeSemSQL, removeCondSQL)
}

// List returns every name with a lease row (locks), a capacity row
// (semaphores) or a registration (conds).
func (b *backend) List(ctx context.Context) ([]baton.Info, error) {
	if err := b.schema(ctx); err != nil {
		return nil, err
	}
	rows, err := b.pool.Query(ctx, b.q(inspectListSQL))
	if err != nil {
		return nil, err
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (listing.Ref, error) {
		var kind, name string
		err := r.Scan(&kind, &name)
		return listing.Ref{Kind: baton.Kind(kind), Name: name}, err
	})
	if err != nil {
		return nil, err
	}
	qs, err := b.queueRefs(ctx) // jobs_inspect.go
	if err != nil {
		return nil, err
	}
	return listing.Inspect(ctx, append(refs, qs...), b.Inspect)
}

func notExist(kind baton.Kind, name string) error {
	return fmt.Errorf("%s %q: %w", kind, name, fs.ErrNotExist)
}

// Inspect reads who holds and waits from the server's lock table, and the
// last token from the name's lease row.
func (b *backend) Inspect(ctx context.Context, kind baton.Kind, name string) (baton.Info, error) {
	info := baton.Info{Name: name, Kind: kind, Backend: b.Kind(), Holders: []baton.Holder{}}
	if err := b.schema(ctx); err != nil {
		return info, err
	}
	switch kind {
	case baton.KindMutex, baton.KindRWMutex:
		return b.inspectLock(ctx, info)
	case baton.KindSemaphore:
		return b.inspectSem(ctx, info)
	case baton.KindCond:
		var n int
		if err := b.pool.QueryRow(ctx, b.q(inspectCondSQL), name).Scan(&n); err != nil {
			return info, err
		}
		if n == 0 {
			return info, notExist(kind, name)
		}
		info.Waiters = n
		return info, nil
	case baton.KindQueue:
		return b.inspectQueue(ctx, info)
	}
	return info, fmt.Errorf("%w: kind %q", baton.ErrInvalidArgument, kind)
}

// lockRow is a session's row of the lock table: it holds or waits, or
// (semaphores) holds n slots.
type lockRow struct {
	pid       int
	n         int64
	granted   bool
	exclusive bool
	host      string
	app       string
}

func (b *backend) locks(ctx context.Context, key int64) ([]lockRow, error) {
	rows, err := b.pool.Query(ctx, b.q(inspectLocksSQL), key)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (lockRow, error) {
		var l lockRow
		return l, r.Scan(&l.pid, &l.granted, &l.exclusive, &l.host, &l.app)
	})
}

func (b *backend) inspectLock(ctx context.Context, info baton.Info) (baton.Info, error) {
	var n, left int64
	err := b.pool.QueryRow(ctx, b.q(inspectRowSQL), string(info.Kind), info.Name).Scan(&n, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return info, notExist(info.Kind, info.Name)
	}
	if err != nil {
		return info, err
	}
	info.LastToken = baton.Token(n)
	ls, err := b.locks(ctx, b.key(info.Kind, info.Name))
	if err != nil {
		return info, err
	}
	for _, l := range ls {
		if !l.granted {
			info.Waiters++
			continue
		}
		h := holderOf(l.pid, l.host, l.app)
		h.Mode = "shared"
		if l.exclusive {
			// Only exclusive acquisitions write n on the lease row:
			// n is the exclusive holder's token.
			h.Mode, h.Token = "exclusive", baton.Token(n)
			h.TTL = time.Duration(max(left, 0)) * time.Millisecond
		}
		info.Holders = append(info.Holders, h)
	}
	return info, nil
}

func (b *backend) inspectSem(ctx context.Context, info baton.Info) (baton.Info, error) {
	err := b.pool.QueryRow(ctx, b.q(inspectCapSQL), info.Name).Scan(&info.Capacity)
	if errors.Is(err, pgx.ErrNoRows) {
		return info, notExist(info.Kind, info.Name)
	}
	if err != nil {
		return info, err
	}
	var n int64
	err = b.pool.QueryRow(ctx, b.q(inspectTokenSQL), string(info.Kind), info.Name).Scan(&n)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return info, err
	}
	info.LastToken = baton.Token(n)
	// The session with the gate is the head of the queue, still taking
	// slots: a waiter, with those it has so far.
	gate, err := b.locks(ctx, b.key(baton.KindSemaphore, info.Name))
	if err != nil {
		return info, err
	}
	head := 0
	for _, l := range gate {
		info.Waiters++
		if l.granted {
			head = l.pid
		}
	}
	rows, err := b.pool.Query(ctx, b.q(inspectSlotsSQL), b.o.Prefix+"/semaphore/"+info.Name, info.Capacity)
	if err != nil {
		return info, err
	}
	hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lockRow, error) {
		var l lockRow
		return l, r.Scan(&l.pid, &l.n, &l.host, &l.app)
	})
	if err != nil {
		return info, err
	}
	for _, l := range hs {
		if l.pid != head {
			h := holderOf(l.pid, l.host, l.app)
			h.N = l.n
			info.Holders = append(info.Holders, h)
		}
	}
	return info, nil
}

// Remove frees a name and ends its holds. A Mutex or RWMutex keeps its
// lease row, with a new token, so that tokens keep increasing; the
// sessions holding the lock are ended, so the holders'
// renewals fail and their Losses fire, and the next holder waits out the
// lease the exclusive holder left. A Semaphore loses its capacity row (it
// can be made again with another capacity), and the sessions holding its
// permits are ended. Waiters stay queued. A Cond's registrations are deleted, which wakes
// their waiters.
func (b *backend) Remove(ctx context.Context, kind baton.Kind, name string) error {
	if err := b.schema(ctx); err != nil {
		return err
	}
	terminate := func(key int64) error {
		var n int
		return b.pool.QueryRow(ctx, b.q(terminateSQL), key).Scan(&n)
	}
	switch kind {
	case baton.KindMutex, baton.KindRWMutex:
		var n int64
		err := b.pool.QueryRow(ctx, b.q(removeRowSQL), string(kind), name).Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return notExist(kind, name)
		}
		if err != nil {
			return err
		}
		return terminate(b.key(kind, name))
	case baton.KindSemaphore:
		var c int64
		err := b.pool.QueryRow(ctx, b.q(removeSemSQL), name).Scan(&c)
		if errors.Is(err, pgx.ErrNoRows) {
			return notExist(kind, name)
		}
		if err != nil {
			return err
		}
		var k int
		return b.pool.QueryRow(ctx, b.q(terminateSlotsSQL), b.o.Prefix+"/semaphore/"+name, c).Scan(&k)
	case baton.KindCond:
		var n int
		if err := b.pool.QueryRow(ctx, b.q(removeCondSQL), name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return notExist(kind, name)
		}
		return nil
	case baton.KindQueue:
		return b.removeQueue(ctx, name)
	}
	return fmt.Errorf("%w: kind %q", baton.ErrInvalidArgument, kind)
}

var _ baton.Inspector = (*backend)(nil)
