package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Stats counts the queue's jobs in one statement.
func (d *queueDriver) Stats(ctx context.Context) (driver.QueueStats, error) {
	var s driver.QueueStats
	err := d.b.db.QueryRowContext(ctx, `SELECT
			COALESCE(SUM(state = 0 AND owner <> '' AND expires > t.now), 0),
			COALESCE(SUM(state = 0 AND ready_at > t.now AND NOT (owner <> '' AND expires > t.now)), 0),
			COALESCE(SUM(state = 0 AND ready_at <= t.now AND NOT (owner <> '' AND expires > t.now)), 0),
			COALESCE(SUM(state = 1), 0)
		FROM `+d.job+`, (SELECT UTC_TIMESTAMP(6) AS now) t WHERE queue = ?`, d.name).Scan(&s.InFlight, &s.Delayed, &s.Ready, &s.Dead)
	return s, err
}

// Dead lists dead letters, lowest id first.
func (d *queueDriver) Dead(ctx context.Context, limit int) ([]driver.DeadJob, error) {
	rows, err := d.b.db.QueryContext(ctx, `SELECT id, payload, attempts, reason, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', died)`+
		` FROM `+d.job+` WHERE queue = ? AND state = 1 ORDER BY id LIMIT ?`, d.name, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []driver.DeadJob
	for rows.Next() {
		var j driver.DeadJob
		var reason []byte
		var us sql.NullInt64
		if err := rows.Scan(&j.ID, &j.Payload, &j.Attempts, &reason, &us); err != nil {
			return nil, err
		}
		j.Reason, j.At = string(reason), time.UnixMicro(us.Int64)
		out = append(out, j)
	}
	return out, rows.Err()
}

// Requeue makes dead letters ready, attempts from zero, with their keys
// back unless a pending job has taken one (that letter stays dead).
func (d *queueDriver) Requeue(ctx context.Context, ids []uint64) (int, error) {
	n := 0
	for _, id := range ids {
		res, err := d.b.db.ExecContext(ctx, `UPDATE `+d.job+` SET state = 0, attempts = 0, ready_at = UTC_TIMESTAMP(6), ukey_live = ukey, reason = '', died = NULL`+
			` WHERE queue = ? AND id = ? AND state = 1`, d.name, id)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			continue // the key is pending again
		}
		if err != nil {
			return n, err
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	if n > 0 {
		d.ring()
	}
	return n, nil
}

// Purge deletes dead letters.
func (d *queueDriver) Purge(ctx context.Context, ids []uint64) (int, error) {
	args := []any{d.name}
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := d.b.db.ExecContext(ctx, `DELETE FROM `+d.job+` WHERE queue = ? AND state = 1 AND id IN (`+inList(len(ids))+`)`, args...)
	if err != nil {
		return 0, err
	}
	k, err := res.RowsAffected()
	return int(k), err
}

// TxJob is a job put by PutTx.
type TxJob struct {
	Payload     []byte        // not nil, at most 4 MiB
	Key         string        // uniqueness key (see baton.UniqueKey); "" for none
	Delay       time.Duration // >= 0
	MaxAttempts int           // 0 for baton.DefaultMaxAttempts
}

// PutTx puts jobs on the queue name inside the caller's transaction tx:
// they exist, and wake claimants, only once tx commits, so a job commits
// with the data that caused it. prefix is the Backend's table prefix
// (DefaultPrefix unless lease.WithPrefix said otherwise); a Queue handle
// must have been opened once on the database (it creates the table).
// Claimants sleeping on the queue wake at the end of their slice, or at
// the next Put through a Queue handle: the commit is the caller's, after
// which nothing here runs.
func PutTx(ctx context.Context, tx *sql.Tx, prefix, name string, jobs ...TxJob) ([]baton.JobID, error) {
	if ctx == nil || tx == nil {
		return nil, fmt.Errorf("%w: nil context or transaction", baton.ErrInvalidArgument)
	}
	if err := baton.ValidateName(name); err != nil {
		return nil, err
	}
	if len(jobs) == 0 || len(jobs) > baton.MaxBatch {
		return nil, fmt.Errorf("%w: %d jobs, want 1 to %d", baton.ErrInvalidArgument, len(jobs), baton.MaxBatch)
	}
	pj := make([]driver.PutJob, len(jobs))
	for i, j := range jobs {
		switch {
		case j.Payload == nil || len(j.Payload) > queueMaxPayload:
			return nil, fmt.Errorf("%w: job %d: nil payload or over %d bytes", baton.ErrInvalidArgument, i, queueMaxPayload)
		case j.Delay < 0 || j.MaxAttempts < 0 || j.MaxAttempts > baton.MaxJobAttempts || len(j.Key) > baton.MaxJobKeyLen:
			return nil, fmt.Errorf("%w: job %d: negative delay, attempts out of range or key too long", baton.ErrInvalidArgument, i)
		}
		pj[i] = driver.PutJob{Payload: j.Payload, Key: j.Key, MaxAttempts: j.MaxAttempts}
		if pj[i].MaxAttempts == 0 {
			pj[i].MaxAttempts = baton.DefaultMaxAttempts
		}
		if j.Delay > 0 {
			pj[i].At = time.Now().Add(j.Delay)
		}
	}
	ids, _, err := putJobs(ctx, tx, "`"+prefix+"job`", "`"+prefix+"lock`", name, pj, "")
	out := make([]baton.JobID, len(ids))
	for i, id := range ids {
		out[i] = baton.JobID(id)
	}
	return out, err
}

// AckTx acks the job with id and token (Job.ID, Job.Token) of the queue
// name inside the caller's transaction tx, so that the job's effect,
// written in tx, and its Ack commit together or not at all. It returns an
// error matching baton.ErrLost, changing nothing, when the claim with that
// token no longer has the job. The job stays claimed until tx commits (a
// rollback leaves it to its claimant, or to its lease's end). After the
// commit, the claimant's handle learns at its next renewal that the claim
// ended, and its Lost fires then: call nothing else on the Job.
func AckTx(ctx context.Context, tx *sql.Tx, prefix, name string, id baton.JobID, token baton.Token) error {
	if ctx == nil || tx == nil {
		return fmt.Errorf("%w: nil context or transaction", baton.ErrInvalidArgument)
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM `"+prefix+"job` WHERE queue = ? AND id = ? AND token = ? AND owner <> '' AND state = 0", name, uint64(id), uint64(token))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w: job %d, token %d", baton.ErrLost, id, token)
	}
	return nil
}
