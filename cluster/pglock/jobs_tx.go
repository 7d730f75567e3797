package pglock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Tables names the tables of a Backend by their prefix (lease.WithPrefix;
// DefaultPrefix when empty), for the functions that work in a caller's own
// transaction. The package functions PutTx, AckTx, PutSQLTx and AckSQLTx
// are those of the default prefix.
//
// A job put in a transaction commits with it, and is announced to waiting
// claimants at commit; a rollback leaves no job. An Ack in a transaction
// deletes the job's row when it commits, with the effects written beside
// it, so that a job's effect is applied exactly once: a rollback leaves the
// claim held (its row locked until then), and the claim can be acked
// again. The claim's lease must not pass before the commit: its renewals
// wait for the transaction's row lock, and a claim whose lease passes is
// reported lost (its job is still not given to anyone before the
// transaction ends). In a REPEATABLE READ or SERIALIZABLE transaction,
// AckTx fails with a serialization error when the claim was renewed after
// the transaction's snapshot was taken: retry the transaction, or ack in
// READ COMMITTED. The queue tables must exist (a Backend's first Queue
// creates them; see Schema).
type Tables struct{ Prefix string }

func (t Tables) sql(s string) string {
	p := t.Prefix
	if p == "" || p == DefaultPrefix {
		p = DefaultPrefix
	}
	return strings.NewReplacer("baton_", p, "'"+channel+"'", "'"+p+channel+"'").Replace(s)
}

func (t Tables) check(queue string) error {
	if t.Prefix != "" && !prefixRE.MatchString(t.Prefix) {
		return fmt.Errorf("%w: prefix %q", baton.ErrInvalidArgument, t.Prefix)
	}
	return baton.ValidateName(queue)
}

// PutTx puts a job on queue in tx (see Tables). It takes the options and
// gives the errors of Queue.Put.
func (t Tables) PutTx(ctx context.Context, tx pgx.Tx, queue string, payload []byte, opts ...baton.PutOption) (baton.JobID, error) {
	if err := t.check(queue); err != nil {
		return 0, err
	}
	j, err := baton.PutSpec(payload, MaxQueuePayload, opts...)
	if err != nil {
		return 0, err
	}
	ids, err := putJobs(ctx, tx, t.sql, queue, []driver.PutJob{j})
	if err != nil {
		return 0, fmt.Errorf("pglock: put: %w", err)
	}
	return baton.JobID(ids[0]), nil
}

// AckTx acks job in tx (see Tables): the job leaves the queue when tx
// commits. It returns an error matching baton.ErrLost, and changes
// nothing, when the claim is no longer the caller's.
func (t Tables) AckTx(ctx context.Context, tx pgx.Tx, job *baton.Job) error {
	return t.ack(ctx, job, func(s string, args ...any) error {
		var id int64
		return tx.QueryRow(ctx, s, args...).Scan(&id)
	})
}

// PutSQLTx is PutTx for a database/sql transaction of the pgx driver
// (github.com/jackc/pgx/v5/stdlib).
func (t Tables) PutSQLTx(ctx context.Context, tx *sql.Tx, queue string, payload []byte, opts ...baton.PutOption) (baton.JobID, error) {
	if err := t.check(queue); err != nil {
		return 0, err
	}
	j, err := baton.PutSpec(payload, MaxQueuePayload, opts...)
	if err != nil {
		return 0, err
	}
	key, delay := putArgs(j)
	for range 3 {
		var id int64
		err = tx.QueryRowContext(ctx, t.sql(jobsPutSQL), queue, payload, key, delay, j.MaxAttempts).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("pglock: put: %w", err)
		}
		var notified string
		if err := tx.QueryRowContext(ctx, t.sql(jobsNotifySQL), queue).Scan(&notified); err != nil {
			return 0, fmt.Errorf("pglock: put: %w", err)
		}
		return baton.JobID(id), nil
	}
	return 0, fmt.Errorf("pglock: put: the pending job of key %q kept ending while put", j.Key)
}

// AckSQLTx is AckTx for a database/sql transaction of the pgx driver.
func (t Tables) AckSQLTx(ctx context.Context, tx *sql.Tx, job *baton.Job) error {
	return t.ack(ctx, job, func(s string, args ...any) error {
		var id int64
		return tx.QueryRowContext(ctx, s, args...).Scan(&id)
	})
}

// ack deletes the claimed row through run, which returns its id or no row.
func (t Tables) ack(ctx context.Context, job *baton.Job, run func(string, ...any) error) error {
	if job == nil {
		return fmt.Errorf("%w: nil job", baton.ErrInvalidArgument)
	}
	if err := job.Err(); err != nil {
		return err
	}
	id, tok := int64(job.ID()), int64(job.Token())
	// Marked first: the transaction may commit before run returns here.
	var jc *jobClaim
	if v, ok := claims.Load(claimKey{id, tok}); ok {
		jc = v.(*jobClaim)
		jc.txAcked.Store(true)
	}
	err := run(t.sql(jobsAckSQL), id, tok)
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		if jc != nil {
			jc.txAcked.Store(false)
		}
		return fmt.Errorf("pglock: ack: job %d, token %d: %w", id, tok, baton.ErrLost)
	}
	if err != nil {
		return fmt.Errorf("pglock: ack: %w", err)
	}
	return nil
}

var defaultTables Tables

// PutTx puts a job in tx on the tables of DefaultPrefix (see Tables.PutTx).
func PutTx(ctx context.Context, tx pgx.Tx, queue string, payload []byte, opts ...baton.PutOption) (baton.JobID, error) {
	return defaultTables.PutTx(ctx, tx, queue, payload, opts...)
}

// AckTx acks a job in tx on the tables of DefaultPrefix (see Tables.AckTx).
func AckTx(ctx context.Context, tx pgx.Tx, job *baton.Job) error {
	return defaultTables.AckTx(ctx, tx, job)
}

// PutSQLTx puts a job in a database/sql transaction on the tables of
// DefaultPrefix (see Tables.PutSQLTx).
func PutSQLTx(ctx context.Context, tx *sql.Tx, queue string, payload []byte, opts ...baton.PutOption) (baton.JobID, error) {
	return defaultTables.PutSQLTx(ctx, tx, queue, payload, opts...)
}

// AckSQLTx acks a job in a database/sql transaction on the tables of
// DefaultPrefix (see Tables.AckSQLTx).
func AckSQLTx(ctx context.Context, tx *sql.Tx, job *baton.Job) error {
	return defaultTables.AckSQLTx(ctx, tx, job)
}
