package pglock

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/sqlcommon"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// A Value is a row of baton_values: its data and a version that each
// successful CompareAndSwap moves up by one, in the statement that checks
// the old version (the row lock orders concurrent writers, and a writer
// that waited re-reads the row before it decides). The row is never
// deleted, so versions never go back. The same statement notifies
// "v/<name>" on the backend's channel, delivered at commit to the Backend's
// one LISTEN connection, which wakes the waiting handles; after that
// connection failed and came back, every waiter looks again.
const (
	valueLoadSQL = `SELECT version, data FROM baton_values WHERE name = $1`
	// $1 name, $2 old version, $3 data. One row, the new version, when
	// the write happened; none otherwise.
	valueCASSQL = `WITH ins AS (
	INSERT INTO baton_values AS t (name, version, data) SELECT $1::text, 1, $3::bytea WHERE $2::bigint = 0
	ON CONFLICT (name) DO NOTHING RETURNING t.version),
upd AS (
	UPDATE baton_values SET version = version + 1, data = $3::bytea
	WHERE name = $1::text AND version = $2::bigint AND $2::bigint <> 0 RETURNING version),
w AS (SELECT version FROM ins UNION ALL SELECT version FROM upd)
SELECT version, pg_notify('` + channel + `', 'v/' || $1::text)::text FROM w`
	valueVersionSQL = `SELECT coalesce((SELECT version FROM baton_values WHERE name = $1), 0)`
)

func init() { statements = append(statements, valueLoadSQL, valueCASSQL, valueVersionSQL) }

type valueDriver struct {
	b       *backend
	name    string
	payload string
}

// OpenValue makes no request beyond creating the tables on first use.
func (b *backend) OpenValue(ctx context.Context, name string) (driver.Value, error) {
	if err := b.schema(ctx); err != nil {
		return nil, err
	}
	return &valueDriver{b: b, name: name, payload: "v/" + name}, nil
}

func (v *valueDriver) Load(ctx context.Context) ([]byte, uint64, error) {
	var ver int64
	var data []byte
	err := v.b.pool.QueryRow(ctx, v.b.q(valueLoadSQL), v.name).Scan(&ver, &data)
	return sqlcommon.ValueRow(ctx, data, uint64(ver), err, pgx.ErrNoRows)
}

func (v *valueDriver) CompareAndSwap(ctx context.Context, old uint64, data []byte) (uint64, error) {
	if old > 1<<63-1 {
		// No row has it: a conflict, with the version there is.
		return v.conflict(ctx)
	}
	if data == nil {
		data = []byte{}
	}
	var ver int64
	var notified string
	err := v.b.pool.QueryRow(ctx, v.b.q(valueCASSQL), v.name, int64(old), data).Scan(&ver, &notified)
	if errors.Is(err, pgx.ErrNoRows) {
		return v.conflict(ctx)
	}
	if err != nil {
		return 0, lease.CtxErr(ctx, err)
	}
	return uint64(ver), nil
}

// conflict reads the version that refused a write. It is a statement of
// its own: the refusing one read the row in a snapshot that can predate the
// write that refused it.
func (v *valueDriver) conflict(ctx context.Context) (uint64, error) {
	var ver int64
	if err := v.b.pool.QueryRow(ctx, v.b.q(valueVersionSQL), v.name).Scan(&ver); err != nil {
		return 0, lease.CtxErr(ctx, err)
	}
	return uint64(ver), baton.ErrConflict
}

// Wait subscribes before it loads, so a write committed after the load is
// notified to it.
func (v *valueDriver) Wait(ctx context.Context, ver uint64) ([]byte, uint64, error) {
	if err := v.b.lis.ensure(ctx); err != nil {
		return nil, 0, err
	}
	wake := make(chan struct{}, 1)
	v.b.lis.subscribe(v.payload, wake)
	defer v.b.lis.unsubscribe(v.payload, wake)
	return sqlcommon.WaitValue(ctx, ver, func() <-chan struct{} { return wake }, v.Load)
}

func (v *valueDriver) Close() error { return nil }

var _ driver.ValueOpener = (*backend)(nil)
