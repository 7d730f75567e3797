package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// Puts of jobs: one in one round trip, a batch in a transaction of its own.

func (q *queueDriver) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	if len(jobs) == 1 {
		return q.putOne(ctx, jobs[0])
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
