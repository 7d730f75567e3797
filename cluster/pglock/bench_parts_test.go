package pglock

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton/cluster/lease"
)

// BenchmarkUncontendedParts breaks an uncontended Lock+Unlock down: each
// variant runs the statements of one part on a connection of its own, all
// alternated in one loop so that they see the same load, and each reports
// its time over the raw floor's. A variant's time depends on the one run
// before it, so compare variants in both orders: PARTS_REVERSE=1 runs the
// loop backwards, and PARTS_ONLY=a,b keeps those variants (and the floor).
func BenchmarkUncontendedParts(b *testing.B) {
	url := need(b)
	ctx := context.Background()
	be, err := OpenURL(ctx, url, lease.WithTTL(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	m, err := be.Mutex(ctx, "bench-parts")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close(ctx) })
		return c
	}
	run := func(c *pgx.Conn, sql string, args []any, dest ...any) {
		if err := c.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	const idle = "10000"
	run0 := time.Now().UnixNano()
	type variant struct {
		name string
		f    func()
	}
	var vs []variant
	add := func(name string, f func(c *pgx.Conn, k int64, n string)) {
		c, k, n := conn(), int64(1000+len(vs)), fmt.Sprintf("bench-part-%s-%d", name, run0)
		vs = append(vs, variant{name, func() { f(c, k, n) }})
	}
	add("raw", func(c *pgx.Conn, k int64, _ string) {
		var ok bool
		var v string
		run(c, rawLock+"::text", []any{k}, &v)
		run(c, rawUnlock, []any{k}, &ok)
	})
	// The floor of any design with a token and no lease: the lock and a
	// draw of the sequence in one statement, and a plain unlock.
	add("lock+token+plainunlock", func(c *pgx.Conn, k int64, _ string) {
		var ok bool
		var tok int64
		run(c, `SELECT nextval('baton_token_seq') FROM (SELECT pg_advisory_lock($1)) l`, []any{k}, &tok)
		run(c, rawUnlock, []any{k}, &ok)
	})
	// The lock part alone: the advisory lock and the two set_config.
	add("lockpart+plainunlock", func(c *pgx.Conn, k int64, n string) {
		var ok bool
		var prev string
		run(c, lockPart+` x AS (SELECT $1::text, $2::text) SELECT prev FROM l`, []any{"mutex", n, k, idle}, &prev)
		run(c, rawUnlock, []any{k}, &ok)
	})
	// Then the marker's and the row's reads, then the token's draw: the
	// acquisition but its upsert.
	add("lock+reads+plainunlock", func(c *pgx.Conn, k int64, n string) {
		var ok, had bool
		run(c, lockPart+markPart+` x AS (SELECT $4::text) SELECT m.had FROM m`, []any{"mutex", n, k, idle}, &had)
		run(c, rawUnlock, []any{k}, &ok)
	})
	add("lock+reads+draw+plainunlock", func(c *pgx.Conn, k int64, n string) {
		var ok bool
		var tok int64
		run(c, lockPart+markPart+` x AS (SELECT $4::text) SELECT nextval('baton_token_seq') FROM m`, []any{"mutex", n, k, idle}, &tok)
		run(c, rawUnlock, []any{k}, &ok)
	})
	add("acquire+plainunlock", func(c *pgx.Conn, k int64, n string) {
		var tok, wait int64
		var prev string
		var ok bool
		run(c, lockXSQL, []any{"mutex", n, k, idle}, &tok, &prev, &wait)
		run(c, rawUnlock, []any{k}, &ok)
	})
	add("acquire+release", func(c *pgx.Conn, k int64, n string) {
		var tok, wait int64
		var prev string
		var ok bool
		run(c, lockXSQL, []any{"mutex", n, k, idle}, &tok, &prev, &wait)
		run(c, unlockXSQL, []any{k, prev, "mutex", n, tok}, &ok)
	})
	// The release without its write (the row is left as it is, which the
	// protocol cannot do): what a release that wrote nothing would save.
	add("acquire+readonlyrelease", func(c *pgx.Conn, k int64, n string) {
		var tok, wait int64
		var prev string
		var ok bool
		run(c, lockXSQL, []any{"mutex", n, k, idle}, &tok, &prev, &wait)
		run(c, `WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false) FROM u)
SELECT ok FROM u, x`, []any{k, prev}, &ok)
	})
	// A design that writes per session, not per hold: the acquisition
	// takes the lock, reads the marker, draws the token and checks every
	// registered session with a running lease for the transaction-level
	// lock it holds while alive (one try-lock each); the release unlocks
	// and writes nothing. With one registered session and with 16.
	reg := conn()
	if _, err := reg.Exec(ctx, `CREATE UNLOGGED TABLE IF NOT EXISTS baton_bench_sessions (k bigint PRIMARY KEY, n int NOT NULL, expires timestamptz NOT NULL);
DELETE FROM baton_bench_sessions;
INSERT INTO baton_bench_sessions SELECT 5000 + i, CASE WHEN i = 0 THEN 1 ELSE 16 END, clock_timestamp() + interval '1 hour' FROM generate_series(0, 15) i`); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = reg.Exec(ctx, `DROP TABLE IF EXISTS baton_bench_sessions`) })
	live := conn()
	if _, err := live.Exec(ctx, `BEGIN`); err != nil {
		b.Fatal(err)
	}
	if _, err := live.Exec(ctx, `SELECT pg_advisory_xact_lock(5000 + i) FROM generate_series(0, 15) i`); err != nil {
		b.Fatal(err)
	}
	sessionDesign := func(regs int) func(c *pgx.Conn, k int64, n string) {
		return func(c *pgx.Conn, k int64, n string) {
			var tok int64
			var prev string
			var until *time.Time
			var ok bool
			run(c, lockPart+`
m AS MATERIALIZED (SELECT (SELECT expires FROM baton_leases WHERE kind = '' AND name = '') AS trust FROM l WHERE $1::text <> $2::text),
r AS MATERIALIZED (SELECT max(s.expires) AS until FROM baton_bench_sessions s, m
	WHERE s.n <= $5 AND s.expires > clock_timestamp() AND pg_try_advisory_lock_shared(s.k))
SELECT nextval('baton_token_seq'), l.prev, r.until FROM l, m, r`, []any{"mutex", n, k, idle, regs}, &tok, &prev, &until)
			if until != nil {
				b.Fatal("a live session's lock was free")
			}
			run(c, `WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false) FROM u)
SELECT ok FROM u, x`, []any{k, prev}, &ok)
		}
	}
	add("session-design-1", sessionDesign(1))
	add("session-design-16", sessionDesign(16))
	// A design that writes per session and name, not per hold: a session
	// holds a lock of its own for its life, in the first partition of the
	// server's lock table (TestDyingSessionPartitions: a dying session's
	// lock there is gone by any grant its death makes), and a row per name
	// it holds says so until a lease and a half from when it was written;
	// the acquisition waits out the rows of the name whose session's lock
	// is free, and writes only when its own row runs short; the release
	// writes nothing. The rows must be read with a snapshot taken after the
	// grant (TestTerminatedAfterHandoff): by a function called in the
	// acquiring statement (session-keys), or by a second statement sent in
	// the same round trip (session-keys-pipelined). Read in the acquiring
	// statement itself, with the write sent apart when it is due, they give
	// the floor of such a design (session-keys-floor), which is not sound.
	var db uint32
	if err := reg.QueryRow(ctx, `SELECT oid FROM pg_database WHERE datname = current_database()`).Scan(&db); err != nil {
		b.Fatal(err)
	}
	const deadSQL = `SELECT max(expires) FROM (SELECT expires, s FROM baton_bench_holders
	WHERE kind = $1 AND name = $2 AND s <> $3 AND expires > clock_timestamp() OFFSET 0) r
WHERE CASE WHEN pg_try_advisory_lock_shared(s) THEN pg_advisory_unlock_shared(s) ELSE false END`
	if _, err := reg.Exec(ctx, `CREATE UNLOGGED TABLE IF NOT EXISTS baton_bench_holders (kind text NOT NULL, name text NOT NULL,
	s bigint NOT NULL, expires timestamptz NOT NULL, PRIMARY KEY (kind, name, s));
CREATE OR REPLACE FUNCTION baton_bench_dead(text, text, bigint) RETURNS timestamptz VOLATILE LANGUAGE plpgsql AS $$
BEGIN
	RETURN (`+deadSQL+`);
END $$`); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = reg.Exec(ctx, `DROP TABLE IF EXISTS baton_bench_holders; DROP FUNCTION IF EXISTS baton_bench_dead(text, text, bigint)`)
	})
	const ownWrite = `,
w AS (INSERT INTO baton_bench_holders AS t (kind, name, s, expires)
	SELECT $1, $2, k.me, clock_timestamp() + $6::bigint * interval '1 millisecond' FROM k, d
	WHERE NOT coalesce(d.own > clock_timestamp() + $4::bigint * interval '1 millisecond', false)
	ON CONFLICT (kind, name, s) DO UPDATE SET expires = EXCLUDED.expires RETURNING 1)`
	sessionKey := run0 & (1<<62 - 1)
	sessionKeys := func(mode string) func(c *pgx.Conn, k int64, n string) {
		check, write, count := `NULL::timestamptz`, ownWrite, `(SELECT count(*) FROM w)`
		switch mode {
		case "function":
			check = `baton_bench_dead($1, $2, k.me)`
		case "floor":
			check, write, count = `(`+strings.ReplaceAll(deadSQL, "$3", "k.me")+`)`, ``, `0 * $6::bigint`
		}
		acquire := lockPart + `
k AS MATERIALIZED (SELECT coalesce(nullif(current_setting('baton.bench_session', true), ''),
	(SELECT set_config('baton.bench_session', $5::text, false) FROM (SELECT pg_advisory_lock($5)) x))::bigint AS me FROM l WHERE l.ok),
r AS MATERIALIZED (SELECT CASE WHEN current_setting('baton.bench_trusted', true) = 'on' THEN '-infinity'::timestamptz
	ELSE (SELECT expires FROM baton_leases WHERE kind = '' AND name = '') END AS trust FROM k),
m AS MATERIALIZED (SELECT trust, CASE WHEN trust <= clock_timestamp() AND trust > '-infinity'
	THEN set_config('baton.bench_trusted', 'on', false) END AS t FROM r),
d AS MATERIALIZED (SELECT ` + check + ` AS until,
	(SELECT expires FROM baton_bench_holders WHERE kind = $1 AND name = $2 AND s = k.me) AS own FROM k)` + write + `
SELECT nextval('baton_token_seq'), l.prev, coalesce(ceil(extract(epoch FROM greatest(d.until,
	CASE WHEN m.trust > clock_timestamp() THEN m.trust END) - clock_timestamp()) * 1000), 0)::bigint, ` + count + `
FROM l, m, d`
		dead := `SELECT coalesce(ceil(extract(epoch FROM (` + strings.ReplaceAll(deadSQL, "$3", "current_setting('baton.bench_session')::bigint") +
			`) - clock_timestamp()) * 1000), 0)::bigint`
		// Each connection registers once, with a key of its own.
		for sessionKey++; lockPartition(db, sessionKey) != 0; sessionKey++ {
		}
		me := sessionKey
		return func(c *pgx.Conn, k int64, n string) {
			var tok, wait, after, wrote int64
			var prev string
			var ok bool
			args := []any{"mutex", n, k, idle, me, int64(15000)}
			if mode == "pipelined" {
				var bt pgx.Batch
				bt.Queue(acquire, args...).QueryRow(func(r pgx.Row) error { return r.Scan(&tok, &prev, &wait, &wrote) })
				bt.Queue(dead, "mutex", n).QueryRow(func(r pgx.Row) error { return r.Scan(&after) })
				if err := c.SendBatch(ctx, &bt).Close(); err != nil {
					b.Fatal(err)
				}
			} else {
				run(c, acquire, args, &tok, &prev, &wait, &wrote)
			}
			if wait > 0 || after > 0 {
				b.Fatalf("waited %d ms after the name's own session released it", max(wait, after))
			}
			run(c, `WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok),
x AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false) FROM u)
SELECT ok FROM u, x`, []any{k, prev}, &ok)
		}
	}
	add("session-keys", sessionKeys("function"))
	add("session-keys-pipelined", sessionKeys("pipelined"))
	add("session-keys-floor", sessionKeys("floor"))
	add("mutex", func(*pgx.Conn, int64, string) {
		if _, err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	})
	if only := os.Getenv("PARTS_ONLY"); only != "" {
		keep := strings.Split(only, ",")
		vs = slices.DeleteFunc(vs, func(v variant) bool { return v.name != "raw" && !slices.Contains(keep, v.name) })
	}
	for _, v := range vs {
		v.f()
	}
	ts := make([]time.Duration, len(vs))
	rev := os.Getenv("PARTS_REVERSE") != ""
	for b.Loop() {
		for j := range vs {
			i := j
			if rev {
				i = len(vs) - 1 - j
			}
			t0 := time.Now()
			vs[i].f()
			ts[i] += time.Since(t0)
		}
	}
	for i, v := range vs {
		b.ReportMetric(float64(ts[i].Nanoseconds())/float64(b.N), v.name+"-ns/op")
		if i > 0 {
			b.ReportMetric(float64(ts[i])/float64(ts[0]), v.name+"/raw")
		}
	}
}
