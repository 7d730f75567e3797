package mysqllock

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/batch"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// DefaultPrefix is the default prefix of the tables (and of the user-level
// lock names).
const DefaultPrefix = "baton_"

// New returns a Backend on the MySQL or MariaDB server that db reaches. It
// creates its tables (prefix + "lock", "hold", "cond", "value") when they are
// missing; the user needs CREATE, SELECT, INSERT, UPDATE and DELETE on the
// database, and no other privilege. The Backend does not close db.
//
// Each handle that has locked a Mutex keeps one connection of db until it
// is closed; RWMutex, Semaphore and Cond use db's pool for each statement.
// Set db's MaxOpenConns above the number of Mutex handles open at once.
func New(ctx context.Context, db *sql.DB, opts ...lease.Option) (baton.Backend, error) {
	d, err := newBackend(ctx, db, opts, false)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(d), nil
}

type backend struct {
	db     *sql.DB
	c      lease.Config
	ownDB  bool   // OpenURL created db: Close closes it
	t      tables // table names
	wait   int    // session wait_timeout of a holder's connection, seconds
	id     string // random, unique to this Backend
	seq    atomic.Uint64
	closed atomic.Bool

	mu      sync.Mutex
	drivers map[any]func()        // guarded by mu: open drivers and their close
	polls   map[string]*valuePoll // guarded by mu: the pollers of names with waiting Values

	queues batch.Shared[queueCalls] // of queues with open handles

	jan  janitor // the sweeps of idle rows (reclaim.go)
	bell bell    // sleeping waits and their wake-ups (bell.go)
}

type tables struct{ lock, hold, cond, value string }

func newBackend(ctx context.Context, db *sql.DB, opts []lease.Option, own bool) (*backend, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", baton.ErrInvalidArgument)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", baton.ErrInvalidArgument)
	}
	c, err := lease.Build(lease.Spec{Prefix: DefaultPrefix}, opts)
	if err != nil {
		return nil, err
	}
	if c.TTL < time.Second {
		return nil, fmt.Errorf("%w: lease TTL %v: the server counts idle sessions in whole seconds, at least 1s", baton.ErrInvalidArgument, c.TTL)
	}
	for _, r := range c.Prefix {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return nil, fmt.Errorf("%w: table prefix %q: letters, digits and '_' only", baton.ErrInvalidArgument, c.Prefix)
		}
	}
	if len(c.Prefix) > 40 {
		return nil, fmt.Errorf("%w: table prefix %q: at most 40 bytes", baton.ErrInvalidArgument, c.Prefix)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	b := &backend{
		db: db, c: c, ownDB: own,
		t: tables{lock: "`" + c.Prefix + "lock`", hold: "`" + c.Prefix + "hold`", cond: "`" + c.Prefix + "cond`",
			value: "`" + c.Prefix + "value`"},
		wait:    int((c.TTL + time.Second - 1) / time.Second),
		id:      hex.EncodeToString(rnd[:]),
		drivers: make(map[any]func()),
		polls:   make(map[string]*valuePoll),
	}
	if err := b.createTables(ctx); err != nil {
		return nil, err
	}
	if err := b.sweep(ctx, b.idle()); err != nil {
		return nil, fmt.Errorf("delete the rows of idle names: %w", err)
	}
	return b, nil
}

// createTables creates the tables that are missing, and the floor row of
// the lock table (reclaim.go).
func (b *backend) createTables(ctx context.Context) error {
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + b.t.lock + ` (
			name VARBINARY(255) NOT NULL PRIMARY KEY,
			token BIGINT UNSIGNED NOT NULL DEFAULT 0,
			owner VARBINARY(64) NOT NULL DEFAULT '',
			expires DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
			capacity BIGINT NOT NULL DEFAULT 0
		) ENGINE=InnoDB`,
		`CREATE TABLE IF NOT EXISTS ` + b.t.hold + ` (
			name VARBINARY(255) NOT NULL,
			owner VARBINARY(64) NOT NULL,
			mode TINYINT NOT NULL,
			n BIGINT NOT NULL,
			token BIGINT UNSIGNED NOT NULL,
			expires DATETIME(6) NOT NULL,
			PRIMARY KEY (name, owner)
		) ENGINE=InnoDB`,
		`CREATE TABLE IF NOT EXISTS ` + b.t.cond + ` (
			id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
			name VARBINARY(255) NOT NULL,
			handle VARBINARY(64) NOT NULL,
			signalled TINYINT NOT NULL DEFAULT 0,
			expires DATETIME(6) NOT NULL,
			KEY (name, signalled, id),
			KEY (handle)
		) ENGINE=InnoDB`,
		`CREATE TABLE IF NOT EXISTS ` + b.t.value + ` (
			name VARBINARY(255) NOT NULL PRIMARY KEY,
			version BIGINT UNSIGNED NOT NULL,
			data BLOB NOT NULL
		) ENGINE=InnoDB`,
	}
	if err := b.setUp(ctx, stmts); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	return nil
}

// setUp runs stmts and makes the floor row on one connection, holding a
// named lock of the prefix: Backends set up at once would otherwise
// deadlock with each other (the floor row's insert reads the table's
// highest counter).
func (b *backend) setUp(ctx context.Context, stmts []string) error {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var got sql.NullInt64
	lock := "baton-setup:" + b.c.Prefix // apart from userLock's "baton:" names
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lock, int(b.c.RequestTimeout.Seconds())+1).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return fmt.Errorf("the set-up lock %q was not granted in time", lock)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", lock)
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return b.makeFloor(ctx, conn)
}

func (b *backend) Kind() string { return "mysql" }

// ValidateName: names are stored as they are, with a kind prefix, in a
// VARBINARY(255) key; every valid baton name fits.
func (b *backend) ValidateName(name string) error { return nil }

// key is the row key of a name of one kind.
func key(kind byte, name string) string { return string(kind) + ":" + name }

// userLock is the user-level lock name of a row key: MySQL limits GET_LOCK
// names to 64 characters, so the table prefix and the key are hashed.
func (b *backend) userLock(k string) string {
	h := sha256.Sum256([]byte(b.c.Prefix + "\x00" + k))
	return "baton:" + hex.EncodeToString(h[:16])
}

// owner returns a new owner id, unique among every Backend and acquisition.
func (b *backend) owner() string {
	return b.id + "." + fmt.Sprint(b.seq.Add(1))
}

// rowOnce creates a handle's lock table row at its first acquisition, not
// when the handle is opened, so that opening a handle asks the server
// nothing (the Backend checked the server when it was opened). A row swept
// later is made again by the acquisition that finds it missing.
type rowOnce struct{ made atomic.Bool }

func (r *rowOnce) ensure(ctx context.Context, b *backend, k string) error {
	if r.made.Load() {
		return nil
	}
	if _, err := b.ensureRow(ctx, k, 0); err != nil {
		return err
	}
	r.made.Store(true)
	return nil
}

// bg returns a context for a statement that must not be abandoned half-way
// because the caller gave up: go-sql-driver closes the connection when a
// context ends during a query, and what the server did is then unknown.
func (b *backend) bg(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), b.c.RequestTimeout)
}

// ttlMicros is the lease TTL in the unit of the server's INTERVAL.
func (b *backend) ttlMicros() int64 { return b.c.TTL.Microseconds() }

func (b *backend) track(k any, closeFn func()) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return baton.ErrClosed
	}
	b.drivers[k] = closeFn
	return nil
}

func (b *backend) untrack(k any) {
	b.mu.Lock()
	delete(b.drivers, k)
	b.mu.Unlock()
}

func (b *backend) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	m := &mutex{b: b, key: key('m', name)}
	m.ulock = b.userLock(m.key)
	if err := b.track(m, m.closeConn); err != nil {
		return nil, err
	}
	return m, nil
}

func (b *backend) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return &rwlock{state{b: b, key: key('r', name), rw: true}}, nil
}

func (b *backend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	s := &sem{state{b: b, key: key('s', name), capacity: permits}}
	if _, err := b.ensureRow(ctx, s.key, permits); err != nil {
		return nil, err
	}
	var got int64
	if err := b.db.QueryRowContext(ctx, `SELECT capacity FROM `+b.t.lock+` WHERE name = ?`, s.key).Scan(&got); err != nil {
		return nil, err
	}
	if got != permits {
		return nil, fmt.Errorf("%w: semaphore has %d permits, asked for %d", baton.ErrMismatch, got, permits)
	}
	s.row.made.Store(true)
	return s, nil
}

func (b *backend) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	c := newCond(b, key('c', name))
	if err := b.track(c, func() { c.Close() }); err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes what the Backend opened; the core has closed every handle
// before.
func (b *backend) Close() error {
	b.mu.Lock()
	if b.closed.Swap(true) {
		b.mu.Unlock()
		return nil
	}
	fns := make([]func(), 0, len(b.drivers))
	for _, fn := range b.drivers {
		fns = append(fns, fn)
	}
	b.drivers = nil
	b.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	b.closeBell()
	b.jan.stop()
	if b.ownDB {
		return b.db.Close()
	}
	return nil
}

// lostf returns an error matching baton.ErrLost.
func lostf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{baton.ErrLost}, args...)...)
}

// isDeadline reports whether err is a context's end.
func isCtx(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// inList formats n placeholders.
func inList(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }
