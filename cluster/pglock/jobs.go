package pglock

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

func (q *queueDriver) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	if len(jobs) == 1 {
		return q.putOne(ctx, jobs[0])
	}
	if !slices.ContainsFunc(jobs, func(j driver.PutJob) bool { return j.Key != "" }) {
		return q.putMany(ctx, jobs)
	}
	var ids []uint64
	err := pgx.BeginFunc(ctx, q.b.pool, func(tx pgx.Tx) error {
		var err error
		ids, err = putJobs(ctx, tx, q.b.q, q.name, jobs)
		return err
	})
	return ids, lease.CtxErr(ctx, err)
}

// putOne puts a lone job in one round trip: its transaction, then the
// notification if a claimant waits (jobsWakeSQL). A queue whose claimants
// are busy is put to without a NOTIFY, which serialises the commits of
// every notifying session of the server and wakes every listener.
func (q *queueDriver) putOne(ctx context.Context, j driver.PutJob) ([]uint64, error) {
	key, delay := putArgs(j)
	for range 3 {
		var bt pgx.Batch
		bt.Queue("BEGIN")
		bt.Queue(q.b.q(jobsPutSQL), q.name, j.Payload, key, delay, j.MaxAttempts)
		bt.Queue("COMMIT")
		bt.Queue(q.b.q(jobsWakeSQL), q.name)
		br := q.b.pool.SendBatch(ctx, &bt)
		var id int64
		_, err := br.Exec()
		if err == nil {
			err = br.QueryRow().Scan(&id)
		}
		if err == nil || errors.Is(err, pgx.ErrNoRows) {
			for range 2 {
				if _, e := br.Exec(); e != nil {
					err = e
					break
				}
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if errors.Is(err, pgx.ErrNoRows) {
			continue // the key's pending job ended meanwhile
		}
		if err != nil {
			return nil, lease.CtxErr(ctx, err)
		}
		return []uint64{uint64(id)}, nil
	}
	return nil, fmt.Errorf("the pending job of key %q kept ending while put", j.Key)
}

// putMany puts jobs without keys as putOne puts one: in one round trip,
// their transaction then the notification if a claimant waits, so that a
// feeder putting batches to busy claimants sends no NOTIFY. Jobs without
// keys never meet a pending job of their key, so one statement puts them
// all.
func (q *queueDriver) putMany(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	if err := batchSize(jobs); err != nil {
		return nil, err
	}
	todo := make([]int, len(jobs))
	for i := range todo {
		todo[i] = i
	}
	ids := make([]uint64, len(jobs))
	var bt pgx.Batch
	bt.Queue("BEGIN")
	bt.Queue(q.b.q(jobsPutManySQL), putManyArgs(q.name, jobs, todo)...)
	bt.Queue("COMMIT")
	bt.Queue(q.b.q(jobsWakeSQL), q.name)
	br := q.b.pool.SendBatch(ctx, &bt)
	_, err := br.Exec()
	if err == nil {
		var again []int
		again, err = putResults(br, todo, ids)
		if err == nil && len(again) > 0 {
			err = fmt.Errorf("put: no id for job %d, which has no key", again[0])
		}
	}
	if err == nil {
		for range 2 {
			if _, err = br.Exec(); err != nil {
				break
			}
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	return ids, nil
}

// batchSize refuses a batch of more than maxBatchBytes of payloads.
func batchSize(jobs []driver.PutJob) error {
	size := 0
	for _, j := range jobs {
		size += len(j.Payload)
	}
	if size > maxBatchBytes {
		return fmt.Errorf("%w: a batch of %d payload bytes, more than %d", baton.ErrInvalidArgument, size, maxBatchBytes)
	}
	return nil
}

// putManyArgs are the arguments of jobsPutManySQL for jobs todo.
func putManyArgs(queue string, jobs []driver.PutJob, todo []int) []any {
	payloads, keys := make([][]byte, len(todo)), make([]*string, len(todo))
	delays, maxAs := make([]int64, len(todo)), make([]int32, len(todo))
	for k, i := range todo {
		j := jobs[i]
		payloads[k], maxAs[k] = j.Payload, int32(j.MaxAttempts)
		_, delays[k] = putArgs(j)
		if j.Key != "" {
			keys[k] = &j.Key
		}
	}
	return []any{queue, payloads, keys, delays, maxAs}
}

// putArgs returns the key (nil for none) and the delay in ms of a job.
func putArgs(j driver.PutJob) (key any, delay int64) {
	if j.Key != "" {
		key = j.Key
	}
	if !j.At.IsZero() {
		if d := time.Until(j.At); d > 0 {
			delay = max(1, d.Milliseconds())
		}
	}
	return key, delay
}

// putJobs inserts jobs in tx, in one round trip, and notifies the queue at
// commit.
func putJobs(ctx context.Context, tx pgx.Tx, sql func(string) string, queue string, jobs []driver.PutJob) ([]uint64, error) {
	if err := batchSize(jobs); err != nil {
		return nil, err
	}
	ids := make([]uint64, len(jobs))
	todo := make([]int, len(jobs))
	for i := range todo {
		todo[i] = i
	}
	// A job whose key's pending job ended between the conflict and the
	// read is put again: twice at most, as that race is rare.
	for round := 0; len(todo) > 0; round++ {
		if round == 3 {
			return nil, fmt.Errorf("the pending job of key %q kept ending while put", jobs[todo[0]].Key)
		}
		var bt pgx.Batch
		if len(todo) == 1 {
			key, delay := putArgs(jobs[todo[0]])
			bt.Queue(sql(jobsPutSQL), queue, jobs[todo[0]].Payload, key, delay, jobs[todo[0]].MaxAttempts)
		} else {
			bt.Queue(sql(jobsPutManySQL), putManyArgs(queue, jobs, todo)...)
		}
		if round == 0 {
			bt.Queue(sql(jobsNotifySQL), queue)
		}
		br := tx.SendBatch(ctx, &bt)
		again, err := putResults(br, todo, ids)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		todo = again
	}
	return ids, nil
}

// putResults reads the ids of a put of jobs todo (one statement of either
// form) into ids, and returns the jobs to put again: those whose key's
// pending job ended between the conflict and the read.
func putResults(br pgx.BatchResults, todo []int, ids []uint64) (again []int, err error) {
	if len(todo) == 1 {
		var id int64
		err := br.QueryRow().Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return todo, nil
		}
		ids[todo[0]] = uint64(id)
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var ord int64
		var id *int64
		if err := rows.Scan(&ord, &id); err != nil {
			return nil, err
		}
		if ord < 1 || ord > int64(len(todo)) {
			return nil, fmt.Errorf("put: a row for job %d of %d", ord, len(todo))
		}
		if id == nil {
			again = append(again, todo[ord-1])
			continue
		}
		ids[todo[ord-1]] = uint64(*id)
	}
	return again, rows.Err()
}

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
		ctx, cancel := q.b.rctx()
		defer cancel()
		var n int64
		var notified string
		if e := q.b.pool.QueryRow(ctx, q.b.q(jobsGiveBackSQL), ids, toks, q.name).Scan(&n, &notified); e != nil {
			err = fmt.Errorf("giving back %d claims (they return when their lease passes): %w", len(held), e)
		}
	}
	return err
}
