package pglock

import (
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tokens and leases of Mutex and RWMutex names.
//
// Tokens come from one sequence, baton_token_seq: nextval commits nothing
// and takes no transaction id, so drawing a token is no write, and a
// sequence does not go back (but for a crash, below), so tokens increase
// strictly per name (and across names) whatever the clients do. The
// sequence moves by
// passTokens+1: a Mutex hold takes a value and its passes the ones below
// the next.
//
// The lease of an exclusive hold is a row of baton_leases, an UNLOGGED
// table, which the release deletes unless it keeps a lease that still runs
// (so a free name has no row; tokens are the sequence's): its writes make no WAL and wait for no disk. The price is that
// the server empties it after a crash (or a failover), leases and all. So
// the table keeps a marker row (empty kind and name), whose expires is a
// lease after the table was last found empty: an acquisition that finds no
// row for its name waits until then (every session that held before the
// crash ended with it, before the marker was put back). An acquisition
// that finds no marker puts it back (markSQL) and moves the sequence well
// past anything it can have handed out before the crash, since a value
// handed out by a session whose WAL had not reached the disk yet can come
// again after recovery.
//
// Statements of an acquisition are built of a lock part, which takes the
// advisory lock and sets the session's idle timeout (columns ok and prev)
// and makes the commit asynchronous: what it writes need not outlive a
// crash (the lease table is emptied, and a sequence value that was not
// flushed is covered by the marker's move),
// and a draw part, which reads the marker, draws the token and records
// the lease, run only once the lock is granted (the materialised CTEs read
// one another in order). $1 kind, $2 name, $3 key, $4 idle timeout and
// lease in ms. They return the token (0 when the marker is missing: the
// caller then marks and draws again), the idle timeout replaced, and how
// long the acquisition must still wait, in ms: the previous holder's lease
// left on the row (a holder whose session ended without a release), or
// the marker's when the name has no row.
const (
	lockPart  = `WITH l AS MATERIALIZED (SELECT pg_advisory_lock` + lockTail
	lockSPart = `WITH l AS MATERIALIZED (SELECT pg_advisory_lock_shared` + lockTail
	lockTail  = `($3)::text AS g, true AS ok,
	current_setting('idle_session_timeout') AS prev, set_config('idle_session_timeout', $4, false) AS s,
	set_config('synchronous_commit', 'off', true) AS c),`
	tryPart  = `WITH a AS MATERIALIZED (SELECT pg_try_advisory_lock` + tryTail
	trySPart = `WITH a AS MATERIALIZED (SELECT pg_try_advisory_lock_shared` + tryTail
	tryTail  = `($3) AS ok, current_setting('idle_session_timeout') AS prev),
l AS MATERIALIZED (SELECT ok, prev, set_config('idle_session_timeout', CASE WHEN ok THEN $4 ELSE prev END, false) AS s,
	set_config('synchronous_commit', 'off', true) AS c FROM a),`
	// After markSQL, on the connection that already holds the lock.
	heldPart = `WITH l AS (SELECT true AS ok, ''::text AS prev, $3::bigint AS k, $4::text AS i),`

	markPart = `
m AS MATERIALIZED (SELECT (SELECT expires FROM baton_leases WHERE kind = '' AND name = '') AS trust,
	EXISTS (SELECT FROM baton_leases WHERE kind = $1 AND name = $2) AS had FROM l WHERE l.ok),`

	// An exclusive hold records until when its lease runs (server time,
	// pushed back by every renewal, cleared by the release) and keeps the
	// previous holder's. The release clears expires before it unlocks and
	// commits after: the next holder's upsert waits for the row lock, so
	// it reads the cleared value.
	drawXPart = markPart + `
u AS (INSERT INTO baton_leases AS t (kind, name, n, expires)
	SELECT $1, $2, nextval('baton_token_seq'), clock_timestamp() + $4::bigint * interval '1 millisecond' FROM m WHERE m.trust IS NOT NULL
	ON CONFLICT (kind, name) DO UPDATE SET n = EXCLUDED.n, expires = EXCLUDED.expires, prev_expires = t.expires
	RETURNING t.n, t.prev_expires AS until)` + drawTail

	// Readers record no lease of their own, but wait out a writer's that
	// was not released, as writers do; the upsert, which changes nothing,
	// is there to wait for a release's row lock and read what it wrote.
	drawSPart = markPart + `
k AS MATERIALIZED (SELECT nextval('baton_token_seq') AS n FROM m WHERE m.trust IS NOT NULL),
u AS (INSERT INTO baton_leases AS t (kind, name, n) SELECT $1, $2, k.n FROM k
	ON CONFLICT (kind, name) DO UPDATE SET n = t.n
	RETURNING (SELECT n FROM k) AS n, t.expires AS until)` + drawTail

	drawTail = `
SELECT coalesce(u.n, 0), l.prev, coalesce(ceil(extract(epoch FROM greatest(u.until,
	CASE WHEN NOT m.had THEN m.trust END) - clock_timestamp()) * 1000), 0)::bigint
FROM l JOIN m ON true LEFT JOIN u ON true`

	lockXSQL = lockPart + drawXPart
	tryXSQL  = tryPart + drawXPart
	lockSSQL = lockSPart + drawSPart
	trySSQL  = trySPart + drawSPart
	drawXSQL = heldPart + drawXPart
	drawSSQL = heldPart + drawSPart

	// $1 how far the sequence moves, $2 the lease in ms. The marker's
	// expires is a lease from now: the longest any Backend of the database
	// set up with (ttlSQL), and at least this one's. Concurrent markers
	// wait for the first one's insert and then do nothing.
	markSQL = `WITH m AS (INSERT INTO baton_leases (kind, name, n, expires) VALUES ('', '', 0, clock_timestamp() +
		greatest($2::bigint, (SELECT n FROM baton_tokens WHERE kind = 'ttl' AND name = '')) * interval '1 millisecond')
	ON CONFLICT (kind, name) DO NOTHING RETURNING 1)
SELECT count(setval('baton_token_seq', nextval('baton_token_seq') + $1::bigint)) FROM m`
)

// ttlSQL records, at schema setup, the longest lease of the Backends of
// the database, in a logged row: the marker waits that long after a
// crash, whatever lease the Backend that puts it back has. $1 the lease in
// ms.
const ttlSQL = `INSERT INTO baton_tokens AS t (kind, name, n) VALUES ('ttl', '', $1::bigint)
ON CONFLICT (kind, name) DO UPDATE SET n = EXCLUDED.n WHERE t.n < EXCLUDED.n`

// sweepSQL deletes the lease rows that keep no running lease: a release
// deletes its name's row (unlockXSQL, unlockSSQL), so what this finds is
// the rows of holders whose session ended without a release, once their
// lease ran out, and of names whose lease Remove left. Every Backend runs
// it once, at schema setup; until then such a row waits for the name's
// next holder, whose release deletes it.
const sweepSQL = `DELETE FROM baton_leases WHERE kind <> '' AND NOT coalesce(expires > clock_timestamp(), false)`

// crashGap is how far the sequence moves when the marker is missing. A
// session hands out up to 32 steps of the sequence past what the server
// has flushed, and a server has fewer than 2^18 sessions; an asynchronous
// commit can leave more unflushed, which this leaves room for too.
const crashGap = 1 << 36

func init() {
	statements = append(statements, lockXSQL, tryXSQL, lockSSQL, trySSQL, drawXSQL, drawSSQL, markSQL, ttlSQL, sweepSQL)
}

// remark puts the marker back on c (whose session holds the lock) and
// draws the token again. It returns the token and the wait of the draw.
func (d *lockDriver) remark(c *pgxpool.Conn, shared bool) (tok, wait int64, err error) {
	ctx, cancel := d.b.rctx()
	defer cancel()
	var n int64
	if err := c.QueryRow(ctx, d.b.q(markSQL), int64(crashGap), d.b.ms).Scan(&n); err != nil {
		return 0, 0, err
	}
	q := drawXSQL
	if shared {
		q = drawSSQL
	}
	var prev string
	err = c.QueryRow(ctx, d.b.q(q), d.args()...).Scan(&tok, &prev, &wait)
	return tok, wait, err
}
