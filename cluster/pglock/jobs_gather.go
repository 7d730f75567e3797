package pglock

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton/cluster/internal/batch"
	"github.com/batonlock/baton/driver"
)

// Claims and Acks of the handles of one queue in one Backend are gathered:
// while a claim statement runs, the claims that come wait for the next
// one, which claims for all of them at once, and so do Acks. Every claim
// statement writes the queue's token row, whose lock orders concurrent
// claims, so claims one by one would run one after another anyway, each
// paying a round trip and a commit; gathered, a busy Backend's claimants
// pay one per batch. A lone claimant's statements are the ones it made
// before.

// Most jobs one claim statement takes, and most Acks one statement ends.
const (
	claimGatherMost = 64
	ackGatherMost   = 64
)

// queueCalls is what the handles of one queue in one Backend share.
type queueCalls struct {
	claims batch.Gather[claimCall]
	acks   batch.Gather[ackCall]
	head   claimHead
}

// claimCall is a claim of up to n jobs for handle q on its session s, and
// what the statement gave it.
type claimCall struct {
	q    *queueDriver
	s    *session
	n    int
	jcs  []*jobClaim // in token order
	sent time.Time   // when the statement was sent: its leases start after
	err  error
}

// ackCall is the Ack of one claim, and whether the statement deleted its
// row.
type ackCall struct {
	jc      *jobClaim
	deleted bool
	err     error
}

// claimBatch claims for a batch of claim calls in one statement, and gives
// each call its jobs in order of arrival: the oldest jobs to the first
// call. The statement runs to its end even when a caller's context ended.
func (q *queueDriver) claimBatch(batch []*batch.Gathered[claimCall]) {
	total := 0
	for _, c := range batch {
		total += c.V.n
	}
	pids := make([]int32, 0, total)
	for _, c := range batch {
		for range c.V.n {
			pids = append(pids, int32(c.V.s.pid))
		}
	}
	rctx, cancel := q.b.rctx()
	defer cancel()
	h := &q.calls.head
	sent := time.Now()
	f := h.from(sent, false)
	jcs, err := q.claimRows(rctx, total, pids, f)
	if err == nil && len(jcs) == 0 && !f.first {
		// Nothing past the head: a job behind it is the only one left.
		sent = time.Now()
		f = h.from(sent, true)
		jcs, err = q.claimRows(rctx, total, pids, f)
	}
	for _, jc := range jcs {
		h.advance(f, jc.ready, jc.id)
	}
	slices.SortFunc(jcs, func(a, b *jobClaim) int { return int(a.token - b.token) })
	for _, c := range batch {
		c.V.sent, c.V.err = sent, err
		if err != nil {
			continue
		}
		k := min(c.V.n, len(jcs))
		c.V.jcs, jcs = jcs[:k:k], jcs[k:]
		for _, jc := range c.V.jcs {
			jc.q, jc.s = c.V.q, c.V.s
		}
	}
}

// claimRows runs one claim statement for total jobs, reading from f.
func (q *queueDriver) claimRows(ctx context.Context, total int, pids []int32, f claimFrom) ([]*jobClaim, error) {
	var rows pgx.Rows
	var err error
	if total == 1 {
		rows, err = q.b.pool.Query(ctx, q.b.q(jobsClaimOneSQL), q.name, q.b.o.TTL.Milliseconds(), pids[0], f.ready, f.id)
	} else {
		rows, err = q.b.pool.Query(ctx, q.b.q(jobsClaimSQL), q.name, total, q.b.o.TTL.Milliseconds(), pids, f.ready, f.id)
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*jobClaim, error) {
		jc := &jobClaim{loss: driver.NewLoss()}
		var c driver.Claim
		var attempts, maxA int32
		err := r.Scan(&jc.id, &c.Payload, &attempts, &maxA, &jc.token, &jc.ready)
		c.ID, c.Attempt, c.MaxAttempts, c.Token, c.Loss, c.Data = uint64(jc.id), int(attempts), int(maxA), uint64(jc.token), jc.loss, jc
		jc.claim = c
		return jc, err
	})
}

// ack ends claim jc by deleting its row, in a statement shared with the
// Acks of the queue's other handles that come while one runs. It reports
// whether the row was deleted (false: the claim was no longer the row's).
// A statement shared with others runs to its end even when ctx ends
// meanwhile.
func (q *queueDriver) ack(ctx context.Context, jc *jobClaim) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c := &batch.Gathered[ackCall]{V: ackCall{jc: jc}}
	q.calls.acks.Do(c, ackGatherMost, func(*ackCall) int { return 1 }, func(batch []*batch.Gathered[ackCall]) {
		if len(batch) == 1 {
			// Alone, on the caller's context, as an Ack not gathered.
			tag, err := q.b.pool.Exec(ctx, q.b.q(jobsAckSQL), jc.id, jc.token)
			c.V.deleted, c.V.err = err == nil && tag.RowsAffected() == 1, err
			return
		}
		q.ackBatch(batch)
	})
	return c.V.deleted, c.V.err
}

// ackBatch deletes the rows of a batch of Acks in one statement.
func (q *queueDriver) ackBatch(batch []*batch.Gathered[ackCall]) {
	rctx, cancel := q.b.rctx()
	defer cancel()
	ids, toks := make([]int64, len(batch)), make([]int64, len(batch))
	for i, c := range batch {
		ids[i], toks[i] = c.V.jc.id, c.V.jc.token
	}
	rows, err := q.b.pool.Query(rctx, q.b.q(jobsAckManySQL), ids, toks)
	var gone []int64
	if err == nil {
		gone, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	for _, c := range batch {
		c.V.err = err
		c.V.deleted = err == nil && slices.Contains(gone, c.V.jc.id)
	}
}
