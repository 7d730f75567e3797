package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// MaxQueuePayload is the largest payload of a job on PostgreSQL, and
// maxBatchBytes the most payload bytes of one PutBatch.
const (
	MaxQueuePayload = 1 << 20
	maxBatchBytes   = 64 << 20
)

// queueDriver serves one Queue handle. Its claims are renewed on one
// connection of its own, the claimant session (see session): a claim is
// lost when that session ends, and its job is claimable again once its
// lease has passed on the server, which renewals on a session that ended
// no longer push back.
type queueDriver struct {
	b       *backend
	name    string
	payload string // of its notifications
	calls   *queueCalls

	mu     sync.Mutex
	sess   *session               // guarded by mu; nil while no claim needs one
	held   map[*jobClaim]struct{} // guarded by mu
	closed bool                   // guarded by mu
}

// session is a connection that renews claims. Its server process is the
// claimant recorded on the claimed rows. It goes back to the pool when no
// claim and no Claim in progress uses it (refs), so an idle handle holds
// no connection, and the pool checks it before it is taken again.
type session struct {
	mu   sync.Mutex // serialises statements on c
	c    *pgxpool.Conn
	pid  uint32
	dead bool // guarded by mu: c failed and was closed
	refs int  // guarded by the queueDriver's mu
}

// unref drops a use of s, with q.mu held; the last one gives c back.
func (q *queueDriver) unref(s *session) {
	if s.refs--; s.refs > 0 {
		return
	}
	if q.sess == s {
		q.sess = nil
	}
	s.mu.Lock()
	if !s.dead {
		s.c.Release()
	}
	s.dead = true
	s.mu.Unlock()
}

// jobClaim is the driver-private state of a claim (driver.Claim.Data).
type jobClaim struct {
	id, token int64
	ready     time.Time // the row's ready_at, for the claim head
	s         *session
	loss      *driver.Loss
	keeper    *lease.Keeper
	// txAcked is set by AckTx: its transaction deleted the row, so a
	// renewal that finds no row stops quietly rather than report a loss.
	txAcked atomic.Bool
	q       *queueDriver
	claim   driver.Claim
}

// claims maps (id, token) to the claims held in this process, for AckTx.
var claims sync.Map

type claimKey struct{ id, token int64 }

var _ driver.QueueOpener = (*backend)(nil)

// OpenQueue creates the tables on first use and the queue's token row.
func (b *backend) OpenQueue(ctx context.Context, name string) (driver.Queue, error) {
	if err := b.jobsSchema(ctx); err != nil {
		return nil, err
	}
	if _, err := b.pool.Exec(ctx, b.q(jobsOpenSQL), name); err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	return &queueDriver{b: b, name: name, payload: "q/" + name, calls: b.queues.Hold(name), held: map[*jobClaim]struct{}{}}, nil
}

// jobsSchema creates the queue tables once per Backend.
func (b *backend) jobsSchema(ctx context.Context) error {
	if err := b.schema(ctx); err != nil {
		return err
	}
	b.schemaMu.Lock()
	defer b.schemaMu.Unlock()
	if b.jobsOK {
		return nil
	}
	// The DDL takes its tables' strongest locks even when everything
	// exists, and so could deadlock with the claims of other processes
	// (it holds the jobs table while it waits for the queues table that a
	// claim holds while it waits for the jobs table): look first.
	var done bool
	if err := b.pool.QueryRow(ctx, b.q(jobsSchemaDoneSQL)).Scan(&done); err != nil {
		return fmt.Errorf("create queue tables: %w", lease.CtxErr(ctx, err))
	}
	if done {
		b.jobsOK = true
		return nil
	}
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, b.q(jobsSchemaSQL), pgx.QueryExecModeSimpleProtocol)
		return err
	})
	if err != nil {
		return fmt.Errorf("create queue tables: %w", err)
	}
	b.jobsOK = true
	return nil
}

func (q *queueDriver) MaxPayload() int { return MaxQueuePayload }

func claimOf(c driver.Claim) (*jobClaim, error) {
	jc, ok := c.Data.(*jobClaim)
	if !ok || jc == nil {
		return nil, fmt.Errorf("claim of another backend: %w", baton.ErrInvalidArgument)
	}
	return jc, nil
}

// forget stops the claim's renewals and drops it from the handle.
func (q *queueDriver) forget(jc *jobClaim) {
	jc.keeper.Stop()
	claims.Delete(claimKey{jc.id, jc.token})
	q.mu.Lock()
	if _, ok := q.held[jc]; ok {
		delete(q.held, jc)
		q.unref(jc.s)
	}
	q.mu.Unlock()
}

// end runs the statement that ends claim c (ack, retry); it reports the
// claim lost when the row no longer has it.
func (q *queueDriver) end(ctx context.Context, c driver.Claim, sql string, args ...any) error {
	jc, err := claimOf(c)
	if err != nil {
		return err
	}
	q.forget(jc)
	if err := jc.loss.Err(); err != nil {
		return err
	}
	var ended bool
	if sql == jobsAckSQL {
		ended, err = q.ack(ctx, jc)
	} else {
		var tag pgconn.CommandTag
		tag, err = q.b.pool.Exec(ctx, q.b.q(sql), append([]any{jc.id, jc.token}, args...)...)
		ended = tag.RowsAffected() == 1
	}
	if err != nil {
		// Nothing renews the claim any more.
		jc.loss.Fire(fmt.Errorf("the end of the claim may not have reached the server: %w", err))
		return lease.CtxErr(ctx, err)
	}
	if !ended {
		if jc.txAcked.Load() && !q.exists(ctx, jc.id) {
			return nil // acked in the caller's transaction, committed
		}
		jc.loss.Fire(errors.New("the server no longer had the claim"))
		return fmt.Errorf("job %d, token %d: %w", jc.id, jc.token, baton.ErrLost)
	}
	return nil
}

// exists reports whether job id has a row (true when it cannot tell).
func (q *queueDriver) exists(ctx context.Context, id int64) bool {
	var ok bool
	if err := q.b.pool.QueryRow(ctx, q.b.q(jobsExistsSQL), id).Scan(&ok); err != nil {
		return true
	}
	return ok
}

func (q *queueDriver) Ack(ctx context.Context, c driver.Claim) error {
	return q.end(ctx, c, jobsAckSQL)
}

func (q *queueDriver) Retry(ctx context.Context, c driver.Claim, at time.Time, reason string) error {
	var delay int64
	if !at.IsZero() {
		delay = max(1, time.Until(at).Milliseconds())
	}
	return q.end(ctx, c, jobsRetrySQL, delay, reason)
}

func (q *queueDriver) Stats(ctx context.Context) (driver.QueueStats, error) {
	var r, d, f, x int64
	if err := q.b.pool.QueryRow(ctx, q.b.q(jobsStatsSQL), q.name).Scan(&r, &d, &f, &x); err != nil {
		return driver.QueueStats{}, lease.CtxErr(ctx, err)
	}
	return driver.QueueStats{Ready: int(r), Delayed: int(d), InFlight: int(f), Dead: int(x)}, nil
}

func (q *queueDriver) Dead(ctx context.Context, limit int) ([]driver.DeadJob, error) {
	rows, err := q.b.pool.Query(ctx, q.b.q(jobsDeadSQL), q.name, limit)
	if err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (driver.DeadJob, error) {
		var d driver.DeadJob
		var id int64
		var attempts int32
		err := r.Scan(&id, &d.Payload, &attempts, &d.Reason, &d.At)
		d.ID, d.Attempts = uint64(id), int(attempts)
		return d, err
	})
	return out, lease.CtxErr(ctx, err)
}

func ids64(ids []uint64) []int64 {
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if id <= 1<<63-1 {
			out = append(out, int64(id))
		}
	}
	return out
}

func (q *queueDriver) Requeue(ctx context.Context, ids []uint64) (int, error) {
	var n int64
	var notified string
	err := q.b.pool.QueryRow(ctx, q.b.q(jobsRequeueSQL), q.name, ids64(ids)).Scan(&n, &notified)
	return int(n), lease.CtxErr(ctx, err)
}

func (q *queueDriver) Purge(ctx context.Context, ids []uint64) (int, error) {
	var n int64
	err := q.b.pool.QueryRow(ctx, q.b.q(jobsPurgeSQL), q.name, ids64(ids)).Scan(&n)
	return int(n), lease.CtxErr(ctx, err)
}

// Close gives back the claims still held, their losses fired first, and
// the claimant session to the pool.
func (q *queueDriver) Close() error {
	q.mu.Lock()
	if !q.closed {
		q.b.queues.Drop(q.name)
	}
	q.closed = true
	held := q.held
	q.held = nil
	q.mu.Unlock()
	for jc := range held {
		jc.keeper.Stop()
		claims.Delete(claimKey{jc.id, jc.token})
		jc.loss.Fire(errors.New("the queue handle was closed"))
	}
	// The session goes back to the pool once no renewal runs on it.
	q.mu.Lock()
	for jc := range held {
		q.unref(jc.s)
	}
	q.mu.Unlock()
	var err error
	if len(held) > 0 {
		ids, toks := make([]int64, 0, len(held)), make([]int64, 0, len(held))
		for jc := range held {
			ids, toks = append(ids, jc.id), append(toks, jc.token)
		}
		if e := q.giveBackRows(ids, toks); e != nil {
			err = fmt.Errorf("giving back %d claims (they return when their lease passes): %w", len(held), e)
		}
	}
	return err
}
