package pglock

import (
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Release marks: how a release of an exclusive hold writes nothing.
//
// The next holder of a name must wait out the lease on the name's row
// when the previous holder's session ended without a release (it may not
// know yet that it lost), and not otherwise. A release therefore leaves
// the row as it is and, before it unlocks, takes a session advisory lock
// on a key drawn from the hold's token, its release mark. An acquisition
// that finds a lease still running on the row waits it out unless the
// mark of the row's token is held, by its own session or another. A
// session that ends holding a lock never took the mark of its token, so
// however its locks are freed, in whatever order, the next holder waits;
// a mark is held only by a live session that released (a session that
// released and then ended has lost its marks with its locks, and the next
// holder waits out what is left of that lease: the cost of a release that
// writes nothing, which Close avoids by clearing the leases of its marks).
//
// A mark is needed while its lease may run: the session gives it up in
// its next acquisition once the lease has surely run out, or at once when
// that acquisition is of the same name (its token replaces the row's).
// The marks a connection holds are kept with the connection (pgconn's
// CustomData), per prefix, since tokens of different prefixes can be
// equal; a connection whose locks are all dropped (abandon) forgets them.

// releaseXSQL ends an exclusive hold: the mark of its token, then the
// unlock, then the idle timeout restored. $1 key, $2 idle timeout, $3
// token. It returns whether the lock was held and whether the mark was
// taken (a key taken by another session, which only a hash collision
// makes: the next holder then waits out the lease).
const releaseXSQL = `WITH e AS MATERIALIZED (SELECT pg_try_advisory_lock(` + markKey + `$3::bigint, 0)) AS e),
u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok FROM e),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false) FROM u)
SELECT ok, e FROM u, x, e`

// clearMarksSQL clears the leases of rows still carrying the tokens of
// $1 (a closing Backend's marks), then gives the marks up.
const clearMarksSQL = `WITH c AS (UPDATE baton_leases SET expires = NULL WHERE n = ANY($1::bigint[])
	AND kind IN ('mutex', 'rwmutex') RETURNING 1)
SELECT count(pg_advisory_unlock(` + markKey + `e, 0))) + (SELECT count(*) FROM c) FROM unnest($1::bigint[]) e`

func init() { statements = append(statements, releaseXSQL, clearMarksSQL) }

// marks are the release marks a connection holds for one prefix.
type marks struct {
	byKey map[int64]mark // by the advisory key of the name
	held  []int64        // scratch for the tokens held
	drop  []int64        // scratch for the tokens to give up
}

type mark struct {
	tok int64
	at  time.Time // when the hold was released
}

const marksData = "baton/marks/"

// marked records on c the mark of a released hold of key with token tok.
func (b *backend) marked(c *pgxpool.Conn, key, tok int64) {
	b.marksOf(c, true).byKey[key] = mark{tok: tok, at: time.Now()}
}

func (b *backend) marksOf(c *pgxpool.Conn, create bool) *marks {
	cd := c.Conn().PgConn().CustomData()
	m, _ := cd[b.mk].(*marks)
	if m == nil && create {
		m = &marks{byKey: map[int64]mark{}}
		cd[b.mk] = m
	}
	return m
}

// noMarks is the argument for a connection without marks.
var noMarks any = []int64(nil)

// markArgs returns the tokens of the marks c holds, and those an
// acquisition of key gives up once granted: those whose leases have run
// out, and key's own when the acquisition is exclusive. They point to the
// connection's scratch, valid until its next acquisition (pointers, so
// that passing them allocates nothing).
func (b *backend) markArgs(c *pgxpool.Conn, key int64, exclusive bool) (held, drop any) {
	m := b.marksOf(c, false)
	if m == nil {
		return noMarks, noMarks
	}
	// The row's lease runs at most a TTL from the release, by the server's
	// clock; the drift margin covers the two clocks' rates.
	old := time.Now().Add(-b.o.TTL - b.o.Drift)
	m.held, m.drop = m.held[:0], m.drop[:0]
	for k, e := range m.byKey {
		m.held = append(m.held, e.tok)
		if (exclusive && k == key) || e.at.Before(old) {
			m.drop = append(m.drop, e.tok)
		}
	}
	return &m.held, &m.drop
}

// granted forgets the marks that an acquisition on c gave up: it returned
// a row, so it was granted.
func (b *backend) granted(c *pgxpool.Conn) {
	m := b.marksOf(c, false)
	if m == nil || len(m.drop) == 0 {
		return
	}
	for k, e := range m.byKey {
		if containsTok(m.drop, e.tok) {
			delete(m.byKey, k)
		}
	}
}

func containsTok(ts []int64, t int64) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// forgetMarks is for a connection whose session gave up all its advisory
// locks, marks of every prefix included.
func forgetMarks(c *pgxpool.Conn) {
	cd := c.Conn().PgConn().CustomData()
	for k := range cd {
		if strings.HasPrefix(k, marksData) {
			delete(cd, k)
		}
	}
}

// clearMarks clears, on the idle connections of the pool, the leases of
// the rows whose holds they released, and gives the marks up, so that
// the end of their sessions (the pool closed) makes no one wait. A
// connection that fails is closed: its session ends with its marks, and
// the next holders wait out those leases.
func (b *backend) clearMarks() {
	ctx, cancel := b.rctx()
	defer cancel()
	for _, c := range b.pool.AcquireAllIdle(ctx) {
		m := b.marksOf(c, false)
		if m == nil || len(m.byKey) == 0 {
			c.Release()
			continue
		}
		toks := make([]int64, 0, len(m.byKey))
		for _, e := range m.byKey {
			toks = append(toks, e.tok)
		}
		var n int64
		if err := c.QueryRow(ctx, b.q(clearMarksSQL), toks).Scan(&n); err != nil {
			destroy(c)
			continue
		}
		delete(c.Conn().PgConn().CustomData(), b.mk)
		c.Release()
	}
}
