package pglock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/batch"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// DefaultPrefix is the prefix of the backend's tables and notification
// channel, and part of every advisory lock key: backends with different
// prefixes (lease.WithPrefix) share nothing. A prefix is 1 to 40 lower-case
// letters, digits and '_', not starting with a digit.
const DefaultPrefix = "baton_"

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

func buildOptions(opts []lease.Option) (lease.Config, error) {
	c, err := lease.Build(lease.Spec{Prefix: DefaultPrefix}, opts)
	if err != nil {
		return c, err
	}
	if !prefixRE.MatchString(c.Prefix) {
		return c, fmt.Errorf("%w: prefix %q: postgres wants 1 to 40 of a-z, 0-9 and _, not starting with a digit",
			baton.ErrInvalidArgument, c.Prefix)
	}
	// idle_session_timeout counts whole milliseconds.
	if c.TTL < time.Second {
		return c, fmt.Errorf("%w: lease TTL %v, must be >= 1s on postgres", baton.ErrInvalidArgument, c.TTL)
	}
	return c, nil
}

// backend is the driver.Backend; baton.NewBackend wraps it.
type backend struct {
	pool *pgxpool.Pool
	own  bool
	o    lease.Config
	idle string            // idle_session_timeout of a holding session, in ms
	ms   int64             // the same, as a number
	sql  map[string]string // the statements with the prefix in place

	schemaMu sync.Mutex
	schemaOK bool // guarded by schemaMu
	jobsOK   bool // guarded by schemaMu: the queue tables (jobs.go)

	lis *listener

	queues batch.Shared[queueCalls] // of queues with open handles
}

// New returns a Backend on a pool of the caller's; Close leaves the pool
// open. Every hold and every waiting acquisition takes a connection of the
// pool for its duration, so the pool must be large enough for the holds and
// waiters of the program at once. No request is made until the first use.
// The queue's batched statements want the pool's connections to run with
// plan_cache_mode=force_generic_plan, as OpenURL's do (see there):
// without it, PostgreSQL plans them again at each run.
func New(pool *pgxpool.Pool, opts ...lease.Option) (baton.Backend, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", baton.ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(newBackend(pool, false, o)), nil
}

func newBackend(pool *pgxpool.Pool, own bool, o lease.Config) *backend {
	// The server may end the session no sooner than the client gives up:
	// rounded up to whole milliseconds.
	ms := (o.TTL + time.Millisecond - 1) / time.Millisecond
	b := &backend{pool: pool, own: own, o: o, idle: strconv.FormatInt(int64(ms), 10), ms: int64(ms), sql: map[string]string{}}
	r := strings.NewReplacer("baton_", o.Prefix, "'"+channel+"'", "'"+o.Prefix+channel+"'")
	for _, q := range statements {
		b.sql[q] = r.Replace(q)
	}
	b.lis = newListener(b)
	return b
}

func (b *backend) Kind() string { return "postgres" }

// ValidateName has nothing to add: names are stored as text.
func (b *backend) ValidateName(string) error { return nil }

func (b *backend) Close() error {
	b.lis.close()
	if b.own {
		b.pool.Close()
	}
	return nil
}

const schemaSQL = `
SELECT pg_advisory_xact_lock(hashtextextended('baton_', 0));
CREATE TABLE IF NOT EXISTS baton_tokens (
	kind text NOT NULL, name text NOT NULL, n bigint NOT NULL,
	expires timestamptz, prev_expires timestamptz,
	PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS baton_semaphores (
	name text PRIMARY KEY, capacity bigint NOT NULL);
CREATE TABLE IF NOT EXISTS baton_cond (
	id bigserial PRIMARY KEY, name text NOT NULL, expires timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS baton_cond_name ON baton_cond (name, id);
CREATE TABLE IF NOT EXISTS baton_values (
	name text PRIMARY KEY, version bigint NOT NULL, data bytea NOT NULL);
DO $$
BEGIN
	IF to_regclass('baton_token_seq') IS NULL THEN
		CREATE SEQUENCE baton_token_seq AS bigint INCREMENT BY 16;
		-- Above every token the counter rows gave a lock, passes included.
		PERFORM setval('baton_token_seq', coalesce(max(n), 0) + 16) FROM baton_tokens WHERE kind IN ('mutex', 'rwmutex');
	END IF;
	IF to_regclass('baton_leases') IS NULL THEN
		CREATE UNLOGGED TABLE baton_leases (
			kind text NOT NULL, name text NOT NULL, n bigint NOT NULL,
			expires timestamptz, prev_expires timestamptz,
			PRIMARY KEY (kind, name));
		INSERT INTO baton_leases SELECT kind, name, n, expires, prev_expires
			FROM baton_tokens WHERE kind IN ('mutex', 'rwmutex');
		-- A new table lost nothing: its marker is old.
		INSERT INTO baton_leases (kind, name, n, expires) VALUES ('', '', 0, 'epoch');
	END IF;
END $$;
`

// Schema returns the SQL that creates the tables of a backend with prefix
// (DefaultPrefix if empty). The backend runs it on first use; a role
// without the right to create tables needs them created beforehand with it.
func Schema(prefix string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return strings.ReplaceAll(schemaSQL+jobsSchemaSQL, "baton_", prefix)
}

// q returns statement sql with the backend's prefix.
func (b *backend) q(sql string) string { return b.sql[sql] }

// schema creates the tables once per Backend. Creations of concurrent
// clients are serialised by a transaction-level advisory lock, since
// CREATE TABLE IF NOT EXISTS can still collide.
func (b *backend) schema(ctx context.Context) error {
	b.schemaMu.Lock()
	defer b.schemaMu.Unlock()
	if b.schemaOK {
		return nil
	}
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, b.q(schemaSQL), pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, b.q(ttlSQL), b.ms); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, b.q(sweepSQL))
		return err
	})
	if err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	b.schemaOK = true
	return nil
}

// key is the advisory lock key of a name of a kind.
func (b *backend) key(kind baton.Kind, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(b.o.Prefix))
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// rctx bounds a statement that does not wait for another holder. The
// caller's cancellation is not passed on: pgx closes the connection when a
// context ends mid-statement, which would drop the session's locks.
func (b *backend) rctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.o.RequestTimeout)
}

// destroy closes a connection instead of giving it back to the pool: the
// server ends the session and releases every lock of it.
func destroy(c *pgxpool.Conn) {
	pc := c.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pc.Close(ctx)
}

// connLost reports whether err says that the connection or its session
// failed, rather than the statement.
func connLost(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	return pe.Severity == "FATAL" || strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
}

const abandonSQL = `SELECT pg_advisory_unlock_all()::text,
	set_config('idle_session_timeout', coalesce($1, current_setting('idle_session_timeout')), false)`

// abandon gives back every lock of c's session before c returns to the
// pool, so that a cancelled acquisition holds nothing once it has returned
// (closing the connection would leave the session to end a moment later).
// prev is the idle timeout to restore, "" when it was not changed. A
// connection that cannot be cleaned is destroyed.
func (b *backend) abandon(c *pgxpool.Conn, prev string) {
	if c.Conn().IsClosed() {
		c.Release()
		return
	}
	var p any
	if prev != "" {
		p = prev
	}
	ctx, cancel := b.rctx()
	defer cancel()
	var a, s string
	if err := c.QueryRow(ctx, abandonSQL, p).Scan(&a, &s); err != nil {
		destroy(c)
		return
	}
	c.Release()
}

// interruptGrace is how long a cancelled statement is given to end after the
// cancel request before its socket is closed.
const interruptGrace = 200 * time.Millisecond

// waitRow runs a statement that may wait for another holder on c, and scans
// its row. The caller's context is watched here rather than by pgx: when it
// ends, a cancel request ends the statement, or its socket is closed if the
// server does not answer in time. It reports interrupted when that
// happened (err is then the statement's own: nil if it completed); the
// caller then gives back what the statement took.
func waitRow(ctx context.Context, c *pgxpool.Conn, sql string, args []any, dest ...any) (interrupted bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	pc := c.Conn().PgConn()
	done, fin := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fin)
		cctx, cancel := context.WithTimeout(context.Background(), interruptGrace)
		defer cancel()
		// Once the cancel request has been answered, the server has
		// signalled the session: the signal cannot reach a later
		// statement, and the connection can be cleaned and reused.
		if err := pc.CancelRequest(cctx); err != nil {
			_ = pc.Conn().Close()
			return
		}
		select {
		case <-done:
		case <-cctx.Done():
			_ = pc.Conn().Close()
		}
	})
	err = c.QueryRow(context.Background(), sql, args...).Scan(dest...)
	close(done)
	if !stop() {
		<-fin
		return true, err
	}
	return false, err
}

// hold is the state of one grant: the connection whose session holds it and
// the lease kept on that connection.
type hold struct {
	b      *backend
	c      *pgxpool.Conn
	loss   *driver.Loss
	keeper *lease.Keeper
	prev   string  // idle_session_timeout before the hold, restored after
	shared bool    // a read lock (set by Downgrade, read by Release: never at once)
	slots  []int32 // semaphore slots held; guarded by mu
	renew  []any   // arguments of renewSQL for an exclusive lock; nil otherwise
	tok    int64   // the token drawn from the sequence, for locks
	passes int64   // how many times the hold was passed (Mutex only)

	mu sync.Mutex // serialises statements on c (pings, downgrade, release)
}

// errLost wraps the cause of a loss so that the lease keeper fires it at once.
func errLost(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{baton.ErrLost}, args...)...)
}

// start starts the lease of a hold whose acquisition was sent at sent. A
// long wait leaves little of a lease counted from then, so the connection
// is pinged first and the lease counted from the ping.
func (h *hold) start(sent time.Time, name string) error {
	if time.Since(sent) > h.b.o.RenewEvery {
		var err error
		if sent, err = h.ping(context.Background()); err != nil {
			return err
		}
	}
	h.keeper = lease.StartKeeper(sent, &h.b.o, h.ping, h.loss, name)
	return nil
}

// ping renews the lease: any statement restarts the server's idle timer.
// It runs to its deadline even when the keeper stops (a cancelled statement
// would close the connection and drop the lock).
func (h *hold) ping(ctx context.Context) (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(h.b.o.TTL)
	}
	pctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	sent := time.Now()
	if h.renew == nil || h.shared {
		if err := h.c.Ping(pctx); err != nil {
			return sent, errLost("connection of the hold: %v", err)
		}
		return sent, nil
	}
	tag, err := h.c.Exec(pctx, h.b.q(renewSQL), h.renew...)
	if err != nil {
		return sent, errLost("connection of the hold: %v", err)
	}
	if tag.RowsAffected() == 0 {
		return sent, errLost("the lease row of the hold has another token")
	}
	return sent, nil
}

// end stops the lease and runs the release statement; the connection goes
// back to the pool when the release confirms the hold, and is destroyed
// otherwise. It returns an error matching baton.ErrLost when the hold was
// lost.
func (h *hold) end(sql string, args ...any) error {
	if h.keeper != nil {
		h.keeper.Stop()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loss.Err(); err != nil {
		destroy(h.c)
		return err
	}
	ctx, cancel := h.b.rctx()
	defer cancel()
	var held bool
	err := h.c.QueryRow(ctx, h.b.q(sql), args...).Scan(&held)
	switch {
	case err != nil:
		destroy(h.c)
		if connLost(err) {
			// The session ended before the release (terminated, the server
			// restarted) and its locks with it: the hold was lost then.
			h.loss.Fire(fmt.Errorf("release: the session of the hold had ended: %w", err))
			return h.loss.Err()
		}
		return fmt.Errorf("release: %w", err)
	case !held:
		destroy(h.c)
		h.loss.Fire(errors.New("the server no longer had the lock"))
		return h.loss.Err()
	}
	h.c.Release()
	return nil
}

var _ driver.Backend = (*backend)(nil)
