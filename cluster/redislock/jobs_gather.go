package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/batonlock/baton/cluster/internal/batch"
)

// The first claim script of the Claims of one queue's handles in one
// Backend is gathered: while one runs, the claims that come wait for the
// next, which claims for all of them at once and hands each its share,
// the oldest jobs to the first come. A script costs the server about as
// much to start as to claim a job, and each claim a round trip: a busy
// Backend's claimants pay those once per batch. A lone claimant's script
// is the one it ran before. A claim that finds nothing runs the script
// again on its own when it waits (it tells the server how long). Acks
// are gathered the same way, into one script that ends them all.

// The most jobs one gathered claim script takes, and the most claims one
// gathered ack script ends.
const (
	claimGatherMost = 64
	ackGatherMost   = 64
)

// queueCalls is what the handles of one queue in one Backend share.
type queueCalls struct {
	claims batch.Gather[claimCall]
	acks   batch.Gather[ackCall]
}

// ackCall is the Ack of one claim, and the script's reply for it: 1 when
// it ended the claim, 0 when the server no longer had it; nil when the
// outcome is unknown.
type ackCall struct {
	jc  *jobClaim
	v   any
	err error
}

// claimCall is a claim of up to n jobs, and what the script gave it: its
// share of the reply ({0, job fields...}, or {wait} when none), whether
// the replicas acknowledged it, and when the script was sent.
type claimCall struct {
	n     int
	r     []any
	acked bool
	sent  time.Time
	err   error
}

// claimGathered runs the claim script for n jobs, gathered with the other
// first claims of the queue's handles in this Backend (see above); ctx
// bounds the script when it runs alone.
func (q *queueDriver) claimGathered(ctx context.Context, n int) (r []any, acked bool, sent time.Time, err error) {
	c := &batch.Gathered[claimCall]{V: claimCall{n: n}}
	q.calls.claims.Do(c, claimGatherMost, func(c *claimCall) int { return c.n }, func(batch []*batch.Gathered[claimCall]) {
		if len(batch) == 1 {
			q.claimBatch(ctx, batch)
			return
		}
		// Shared: bounded by the request timeout alone, as the caller's is.
		bctx, cancel := context.WithTimeout(context.Background(), q.d.o.RequestTimeout)
		defer cancel()
		q.claimBatch(bctx, batch)
	})
	return c.V.r, c.V.acked, c.V.sent, c.V.err
}

// claimBatch claims for a batch of claim calls in one script and gives
// each call its share of the jobs, in order of arrival.
func (q *queueDriver) claimBatch(ctx context.Context, batch []*batch.Gathered[claimCall]) {
	total := 0
	for _, c := range batch {
		total += c.V.n
	}
	sent := time.Now()
	v, acked, err := q.runKeys(ctx, scriptJobsClaim, jobsKeysClaim, total, q.d.ttlMS(), 0)
	r, _ := v.([]any)
	for _, c := range batch {
		c.V.acked, c.V.sent, c.V.err = acked, sent, err
	}
	if err != nil {
		return
	}
	if len(batch) == 1 || len(r) < 1 || (len(r)-1)%4 != 0 {
		// One call, or a reply claimOnce refuses: the first call has it
		// whole, the others nothing.
		batch[0].V.r = r
		for _, c := range batch[1:] {
			c.V.r = []any{int64(0)}
		}
		return
	}
	jobs := r[1:]
	for _, c := range batch {
		k := min(c.V.n, len(jobs)/4)
		if k == 0 {
			c.V.r = []any{int64(0)}
			continue
		}
		c.V.r = append([]any{int64(0)}, jobs[:4*k]...)
		jobs = jobs[4*k:]
	}
}

// ackGathered runs the ack of claim jc, gathered with the other Acks of
// the queue's handles in this Backend; alone, it runs the ack script as an
// Ack not gathered does, on ctx. A script shared with others runs to its
// end even when ctx ends meanwhile.
func (q *queueDriver) ackGathered(ctx context.Context, jc *jobClaim) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &batch.Gathered[ackCall]{V: ackCall{jc: jc}}
	q.calls.acks.Do(c, ackGatherMost, func(*ackCall) int { return 1 }, func(batch []*batch.Gathered[ackCall]) {
		if len(batch) == 1 {
			if jc.key == "" {
				// No key to free: neither the uniq key nor an empty argument.
				c.V.v, c.V.err = q.writeKeys(ctx, scriptJobsAck, jobsKeysAck, jc.id, jc.token)
			} else {
				c.V.v, c.V.err = q.writeKeys(ctx, scriptJobsAck, jobsKeysAck+1, jc.id, jc.token, jc.key)
			}
			return
		}
		q.ackBatch(batch)
	})
	return c.V.v, c.V.err
}

// ackBatch ends the claims of a batch of Acks in one script.
func (q *queueDriver) ackBatch(batch []*batch.Gathered[ackCall]) {
	ctx, cancel := context.WithTimeout(context.Background(), q.d.o.RequestTimeout)
	defer cancel()
	args := make([]any, 0, 3*len(batch))
	for _, c := range batch {
		args = append(args, c.V.jc.id, c.V.jc.token, c.V.jc.key)
	}
	v, err := q.writeKeys(ctx, scriptJobsAckMany, jobsKeysAck+1, args...)
	r, _ := v.([]any)
	for i, c := range batch {
		c.V.err = err
		if v != nil && len(r) == len(batch) {
			c.V.v = r[i]
		} else if v != nil {
			c.V.v, c.V.err = nil, fmt.Errorf("jobs_ackmany replied %v", v)
		}
	}
}
