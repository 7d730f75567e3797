package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/listing"
	"github.com/batonlock/baton/internal/queuedetail"
)

// Inspection of queues: List names the queues that have jobs, Inspect
// shows a queue's claims as holders and its counts in Detail (as the
// same-host queue does), Remove deletes its jobs; the token row stays, so
// tokens keep increasing if the queue is used again.
const (
	jobsListSQL = `SELECT DISTINCT queue FROM baton_jobs ORDER BY 1`

	// $1 queue: the counts by state, the last token and the age of the
	// oldest ready job in µs; no row when the queue was never opened.
	jobsInspectSQL = `SELECT
	count(j.id) FILTER (WHERE j.state = 0 AND j.ready_at <= clock_timestamp()),
	count(j.id) FILTER (WHERE j.state = 0 AND j.ready_at > clock_timestamp()),
	count(j.id) FILTER (WHERE j.state = 1), count(j.id) FILTER (WHERE j.state = 2), q.token,
	coalesce(floor(extract(epoch FROM clock_timestamp() - min(j.ready_at) FILTER (WHERE j.state = 0 AND j.ready_at <= clock_timestamp())) * 1000000), 0)::bigint
FROM baton_queues q LEFT JOIN baton_jobs j ON j.queue = q.queue WHERE q.queue = $1 GROUP BY q.token`

	// $1 queue: up to 100 claims, the soonest to lapse first.
	jobsClaimsSQL = `SELECT id, token, claimant, ceil(extract(epoch FROM lease_until - clock_timestamp()) * 1000)::bigint
FROM baton_jobs WHERE queue = $1 AND state = 1 ORDER BY lease_until LIMIT 100`

	// $1 queue.
	jobsRemoveSQL = `WITH d AS (DELETE FROM baton_jobs WHERE queue = $1 RETURNING 1)
SELECT (SELECT count(*) FROM d), EXISTS (SELECT 1 FROM baton_queues WHERE queue = $1)`
)

func init() {
	statements = append(statements, jobsListSQL, jobsInspectSQL, jobsClaimsSQL, jobsRemoveSQL)
}

// queueRefs lists the queues with jobs (none when the queue tables were
// never created).
func (b *backend) queueRefs(ctx context.Context) ([]listing.Ref, error) {
	var exists bool
	if err := b.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, b.o.Prefix+"jobs").Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := b.pool.Query(ctx, b.q(jobsListSQL))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (listing.Ref, error) {
		var name string
		err := r.Scan(&name)
		return listing.Ref{Kind: baton.KindQueue, Name: name}, err
	})
}

func (b *backend) inspectQueue(ctx context.Context, info baton.Info) (baton.Info, error) {
	if err := b.jobsSchema(ctx); err != nil {
		return info, err
	}
	var ready, delayed, inFlight, dead, token, oldest int64
	err := b.pool.QueryRow(ctx, b.q(jobsInspectSQL), info.Name).Scan(&ready, &delayed, &inFlight, &dead, &token, &oldest)
	if errors.Is(err, pgx.ErrNoRows) {
		return info, notExist(info.Kind, info.Name)
	}
	if err != nil {
		return info, err
	}
	info.Waiters = -1
	info.LastToken = baton.Token(token)
	info.Detail = queuedetail.Format(queuedetail.Counts{Ready: int(ready), Delayed: int(delayed), InFlight: int(inFlight), Dead: int(dead), Oldest: time.Duration(oldest) * time.Microsecond})
	rows, err := b.pool.Query(ctx, b.q(jobsClaimsSQL), info.Name)
	if err != nil {
		return info, err
	}
	info.Holders, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (baton.Holder, error) {
		var id, tok, ms int64
		var pid *int32
		err := r.Scan(&id, &tok, &pid, &ms)
		h := baton.Holder{Mode: "exclusive", Token: baton.Token(tok), TTL: time.Duration(ms) * time.Millisecond, Owner: fmt.Sprint("job ", id)}
		if pid != nil {
			h.Owner += fmt.Sprint(", session ", *pid)
		}
		return h, err
	})
	return info, err
}

func (b *backend) removeQueue(ctx context.Context, name string) error {
	if err := b.jobsSchema(ctx); err != nil {
		return err
	}
	var n int64
	var known bool
	if err := b.pool.QueryRow(ctx, b.q(jobsRemoveSQL), name).Scan(&n, &known); err != nil {
		return err
	}
	if n == 0 && !known {
		return notExist(baton.KindQueue, name)
	}
	return nil
}
