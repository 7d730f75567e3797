package pglock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster"
	"github.com/batonlock/baton/driver"
)

// Option configures New and OpenURL.
type Option func(*options) error

type options struct {
	lease cluster.LeaseOptions
	log   *slog.Logger
}

// WithTTL sets the lease: a holder whose connection is silent this long
// (partitioned, paused) has its session ended by the server. Default
// cluster.DefaultTTL.
func WithTTL(d time.Duration) Option {
	return func(o *options) error { o.lease.TTL = d; return nil }
}

// WithRenewEvery sets how often a holder's connection is pinged; default a
// third of the TTL.
func WithRenewEvery(d time.Duration) Option {
	return func(o *options) error { o.lease.RenewEvery = d; return nil }
}

// WithDrift sets the margin by which a holder gives up before the server
// may end its session; default 1% of the TTL plus 2 ms.
func WithDrift(d time.Duration) Option {
	return func(o *options) error { o.lease.Drift = d; return nil }
}

// WithLogger receives background failures; default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.log = l; return nil }
}

func buildOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil option", baton.ErrInvalidArgument)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.lease.TTL != 0 && o.lease.TTL < time.Second {
		return o, fmt.Errorf("%w: lease TTL %v, must be >= 1s", baton.ErrInvalidArgument, o.lease.TTL)
	}
	if err := o.lease.Normalize(); err != nil {
		return o, err
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	return o, nil
}

// backend is the driver.Backend; baton.NewBackend wraps it.
type backend struct {
	pool *pgxpool.Pool
	own  bool
	o    options
	idle string // idle_session_timeout of a holding session, in ms

	schemaMu sync.Mutex
	schemaOK bool // guarded by schemaMu

	lis *listener
}

// New returns a Backend on a pool of the caller's; Close leaves the pool
// open. Every hold and every waiting acquisition takes a connection of the
// pool for its duration, so the pool must be large enough for the holds and
// waiters of the program at once. No request is made until the first use.
func New(pool *pgxpool.Pool, opts ...Option) (baton.Backend, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", baton.ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(newBackend(pool, false, o)), nil
}

func newBackend(pool *pgxpool.Pool, own bool, o options) *backend {
	// The server may end the session no sooner than the client gives up:
	// rounded up to whole milliseconds.
	ms := (o.lease.TTL + time.Millisecond - 1) / time.Millisecond
	b := &backend{pool: pool, own: own, o: o, idle: strconv.FormatInt(int64(ms), 10)}
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
SELECT pg_advisory_xact_lock(7306214418536961024);
CREATE TABLE IF NOT EXISTS baton_tokens (
	kind text NOT NULL, name text NOT NULL, n bigint NOT NULL,
	PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS baton_semaphores (
	name text PRIMARY KEY, capacity bigint NOT NULL);
CREATE TABLE IF NOT EXISTS baton_cond (
	id bigserial PRIMARY KEY, name text NOT NULL, expires timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS baton_cond_name ON baton_cond (name, id);
`

// Schema is the SQL that creates the tables of the backend. The backend runs
// it on first use; a role without the right to create tables needs them
// created beforehand with it.
const Schema = schemaSQL

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
		_, err := tx.Exec(ctx, schemaSQL, pgx.QueryExecModeSimpleProtocol)
		return err
	})
	if err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	b.schemaOK = true
	return nil
}

// key is the advisory lock key of a name of a kind.
func key(kind baton.Kind, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// rctx bounds a statement that does not wait for another holder. The
// caller's cancellation is not passed on: pgx closes the connection when a
// context ends mid-statement, which would drop the session's locks.
func (b *backend) rctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.o.lease.TTL)
}

// destroy closes a connection instead of giving it back to the pool: the
// server ends the session and releases every lock of it.
func destroy(c *pgxpool.Conn) {
	pc := c.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pc.Close(ctx)
}

// interruptGrace is how long a cancelled statement is given to end after the
// cancel request before its socket is closed.
const interruptGrace = 200 * time.Millisecond

// waitRow runs a statement that may wait for another holder on c, and scans
// its row. The caller's context is watched here rather than by pgx: when it
// ends, a cancel request ends the statement, or its socket is closed if the
// server does not answer. It reports interrupted when that happened; the
// connection is then unfit for reuse (a cancel request may still land on a
// later statement) and the caller destroys it.
func waitRow(ctx context.Context, c *pgxpool.Conn, sql string, args []any, dest ...any) (interrupted bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		pc := c.Conn().PgConn()
		go func() {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = pc.CancelRequest(cctx)
		}()
		select {
		case <-done:
		case <-time.After(interruptGrace):
			_ = pc.Conn().Close()
		}
	})
	err = c.QueryRow(context.Background(), sql, args...).Scan(dest...)
	close(done)
	if !stop() {
		return true, ctx.Err()
	}
	return false, err
}

// hold is the state of one grant: the connection whose session holds it and
// the lease kept on that connection.
type hold struct {
	b      *backend
	c      *pgxpool.Conn
	loss   *driver.Loss
	keeper *cluster.Keeper
	prev   string  // idle_session_timeout before the hold, restored after
	shared bool    // a read lock (set by Downgrade, read by Release: never at once)
	slots  []int32 // semaphore slots held; guarded by mu

	mu sync.Mutex // serialises statements on c (pings, downgrade, release)
}

// errLost wraps the cause of a loss so that the lease keeper fires it at once.
func errLost(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{baton.ErrLost}, args...)...)
}

// start starts the lease of a hold whose acquisition was sent at sent. A
// long wait leaves little of a lease counted from then, so the connection
// is pinged first and the lease counted from the ping.
func (h *hold) start(sent time.Time) error {
	if time.Since(sent) > h.b.o.lease.RenewEvery {
		var err error
		if sent, err = h.ping(context.Background()); err != nil {
			return err
		}
	}
	h.keeper = cluster.StartKeeper(sent, h.b.o.lease, h.ping, h.loss, h.b.o.log)
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
		dl = time.Now().Add(h.b.o.lease.TTL)
	}
	pctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	sent := time.Now()
	if err := h.c.Ping(pctx); err != nil {
		return sent, errLost("connection of the hold: %v", err)
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
	err := h.c.QueryRow(ctx, sql, args...).Scan(&held)
	switch {
	case err != nil:
		destroy(h.c)
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
