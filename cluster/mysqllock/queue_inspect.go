package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/queuedetail"
)

// Inspection of queues: a queue is listed by its id counter row (Q:<name>
// in the lock table), made when a handle opens it. Inspect shows its
// claims as holders and its counts in Detail; Remove deletes its jobs
// and keeps its counter rows, so its tokens go on increasing and
// claimants waiting on it sleep on.

// inspectQueue reads the counts and the oldest ready job's age in one
// statement, and the claims with their lease left.
func (b *backend) inspectQueue(ctx context.Context, name string) (baton.Info, error) {
	info := baton.Info{Name: name, Kind: baton.KindQueue, Backend: b.Kind(), Impl: "rows", Holders: []baton.Holder{}, Waiters: -1}
	var tok uint64
	err := b.db.QueryRowContext(ctx, `SELECT token FROM `+b.t.lock+` WHERE name = ?`, key('q', name)).Scan(&tok)
	if err == sql.ErrNoRows {
		return info, fmt.Errorf("queue %q: %w", name, fs.ErrNotExist)
	}
	if err != nil {
		return info, err
	}
	info.LastToken = baton.Token(tok)
	job := "`" + b.c.Prefix + "job`"
	var inFlight, delayed, ready, dead int
	var oldest sql.NullInt64
	err = b.db.QueryRowContext(ctx, `SELECT
			COALESCE(SUM(state = 0 AND owner <> '' AND expires > t.now), 0),
			COALESCE(SUM(state = 0 AND ready_at > t.now AND NOT (owner <> '' AND expires > t.now)), 0),
			COALESCE(SUM(state = 0 AND ready_at <= t.now AND NOT (owner <> '' AND expires > t.now)), 0),
			COALESCE(SUM(state = 1), 0),
			TIMESTAMPDIFF(MICROSECOND, MIN(IF(state = 0 AND ready_at <= t.now AND NOT (owner <> '' AND expires > t.now), ready_at, NULL)), MAX(t.now))
		FROM `+job+`, (SELECT UTC_TIMESTAMP(6) AS now) t WHERE queue = ?`, name).Scan(&inFlight, &delayed, &ready, &dead, &oldest)
	if err != nil {
		return info, err
	}
	info.Detail = queuedetail.Format(queuedetail.Counts{Ready: ready, Delayed: delayed, InFlight: inFlight, Dead: dead, Oldest: time.Duration(oldest.Int64) * time.Microsecond})
	rows, err := b.db.QueryContext(ctx, `SELECT id, token, owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires)
		FROM `+job+` WHERE queue = ? AND state = 0 AND owner <> '' AND expires > UTC_TIMESTAMP(6) ORDER BY expires LIMIT 100`, name)
	if err != nil {
		return info, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, t uint64
		var owner string
		var us int64
		if err := rows.Scan(&id, &t, &owner, &us); err != nil {
			return info, err
		}
		info.Holders = append(info.Holders, baton.Holder{Mode: "exclusive", Token: baton.Token(t),
			TTL: time.Duration(us) * time.Microsecond, Owner: fmt.Sprintf("job %d, %s", id, owner)})
	}
	return info, rows.Err()
}

// removeQueue deletes the queue's jobs: their claimants' next renewal
// finds their row gone, and their Ack or Retry returns ErrLost.
func (b *backend) removeQueue(ctx context.Context, name string) error {
	if _, err := b.inspectQueue(ctx, name); err != nil {
		return err
	}
	_, err := b.db.ExecContext(ctx, "DELETE FROM `"+b.c.Prefix+"job` WHERE queue = ?", name)
	return err
}
