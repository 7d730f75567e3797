package pglock

import (
	"context"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/batch"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// Claim claims up to n ready jobs. A waiting claim subscribes to the
// queue's notifications before it looks; when the look finds nothing, it
// counts itself waiting in the queue's row, which Puts read after their
// commit to decide whether to notify, and looks once more before it
// sleeps, so a Put committed before the count is found by that look and
// one committed after it notifies. Between looks it sleeps until a
// notification, the time the next delayed job is ready or the next lease
// passes, or a renewal period at most (the listener's backstop for
// notifications lost with its connection). A claimant killed while counted
// leaves the count above 0: Puts then notify as if it waited.
func (q *queueDriver) Claim(ctx context.Context, n int, wait bool) ([]driver.Claim, error) {
	wake := make(chan struct{}, 1)
	if wait {
		if err := q.b.lis.ensure(ctx); err != nil {
			return nil, err
		}
		q.b.lis.subscribe(q.payload, wake)
		defer q.b.lis.unsubscribe(q.payload, wake)
	}
	counted := false
	defer func() {
		if !counted {
			return
		}
		if err := q.countWaiting(-1); err != nil {
			q.b.o.Logger.Warn("pglock: a claimant's wait was not counted off; Puts notify until the count is right again", "name", q.name, "err", err)
		}
	}()
	busy := time.Millisecond
	for {
		cs, err := q.claimOnce(ctx, n)
		if err != nil || len(cs) > 0 {
			return cs, err
		}
		if !wait {
			return nil, baton.ErrEmpty
		}
		if !counted {
			if err := q.countWaiting(1); err != nil {
				return nil, err
			}
			counted = true
			continue
		}
		next, err := q.next(ctx)
		if err != nil {
			return nil, err
		}
		d := q.b.o.RenewEvery
		switch {
		case next > 0:
			d, busy = min(d, next), time.Millisecond
		case next == 0:
			// A job is ready but was skipped: another claimant's
			// statement (or a transaction acking it) has its row
			// locked. Look again soon, less often while it lasts.
			d, busy = busy, min(2*busy, d)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// countWaiting moves the queue's count of waiting claimants by delta, on
// a context of its own: pgx drops a connection whose statement is
// cancelled, which would leave the count's outcome unknown, and a Claim
// that ends with its context done still takes itself off the count.
func (q *queueDriver) countWaiting(delta int) error {
	ctx, cancel := q.b.rctx()
	defer cancel()
	_, err := q.b.pool.Exec(ctx, q.b.q(jobsWaitingSQL), q.name, delta)
	return err
}

// next buries the claims that lapsed on their last attempt and returns how
// long until a job is ready or a lease passes: 0 when one is ready now, -1
// when none will be without a Put.
func (q *queueDriver) next(ctx context.Context) (time.Duration, error) {
	var buried int64
	var ms *float64
	if err := q.b.pool.QueryRow(ctx, q.b.q(jobsNextSQL), q.name).Scan(&buried, &ms); err != nil {
		return 0, lease.CtxErr(ctx, err)
	}
	switch {
	case ms == nil:
		return -1, nil
	case *ms <= 0:
		return 0, nil
	}
	return time.Duration(*ms*float64(time.Millisecond)) + time.Millisecond, nil
}

// session returns the handle's claimant session, with a use counted for
// the caller, taking a connection for it when there is none.
func (q *queueDriver) session(ctx context.Context) (*session, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, fmt.Errorf("pglock: %w", baton.ErrClosed)
	}
	if s := q.sess; s != nil {
		s.mu.Lock()
		dead := s.dead
		s.mu.Unlock()
		if !dead {
			s.refs++
			return s, nil
		}
		q.sess = nil
	}
	c, err := q.b.pool.Acquire(ctx)
	if err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	q.sess = &session{c: c, pid: c.Conn().PgConn().PID(), refs: 1}
	return q.sess, nil
}

// claimOnce runs a claim statement once, shared with the claims of the
// queue's other handles that come while one runs (jobs_gather.go). The
// statement runs to its end even when ctx ends meanwhile (bounded by the
// request timeout), so that what it claimed is given back rather than
// left to its lease: a cancelled Claim claims nothing.
func (q *queueDriver) claimOnce(ctx context.Context, n int) ([]driver.Claim, error) {
	s, err := q.session(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		q.mu.Lock()
		q.unref(s)
		q.mu.Unlock()
	}()
	c := &batch.Gathered[claimCall]{V: claimCall{q: q, s: s, n: n}}
	q.calls.claims.Do(c, claimGatherMost, func(c *claimCall) int { return c.n }, q.claimBatch)
	jcs, sent := c.V.jcs, c.V.sent
	if err := c.V.err; err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	q.mu.Lock()
	closed := q.closed
	if !closed && ctx.Err() == nil {
		for _, jc := range jcs {
			jc.keeper = lease.StartKeeper(sent, &q.b.o, jc.renew, jc.loss, q.name)
			q.held[jc] = struct{}{}
			s.refs++
			claims.Store(claimKey{jc.id, jc.token}, jc)
		}
	}
	q.mu.Unlock()
	if closed || ctx.Err() != nil {
		q.giveBack(jcs)
		if closed {
			return nil, fmt.Errorf("pglock: %w", baton.ErrClosed)
		}
		return nil, ctx.Err()
	}
	cs := make([]driver.Claim, len(jcs))
	for i, jc := range jcs {
		cs[i] = jc.claim
	}
	return cs, nil
}

// giveBack gives back claims never handed to the caller.
func (q *queueDriver) giveBack(jcs []*jobClaim) {
	if len(jcs) == 0 {
		return
	}
	ids, toks := make([]int64, len(jcs)), make([]int64, len(jcs))
	for i, jc := range jcs {
		ids[i], toks[i] = jc.id, jc.token
	}
	if err := q.giveBackRows(ids, toks); err != nil {
		q.b.o.Logger.Warn("pglock: giving back claims failed; they return when their lease passes", "name", q.name, "err", err)
	}
}

// giveBackRows puts the claimed rows ids, at their claims' tokens, back in
// their places, and has the next claim read from the first.
func (q *queueDriver) giveBackRows(ids, toks []int64) error {
	ctx, cancel := q.b.rctx()
	defer cancel()
	var n int64
	var notified string
	err := q.b.pool.QueryRow(ctx, q.b.q(jobsGiveBackSQL), ids, toks, q.name).Scan(&n, &notified)
	q.calls.head.clear()
	return err
}

// renew extends the claim's lease on its claimant session. A session that
// failed loses every claim renewed on it, at once: its server process may
// have been ended, and the job is claimable again when the lease passes.
func (jc *jobClaim) renew(ctx context.Context) (time.Time, error) {
	s, b := jc.s, jc.q.b
	s.mu.Lock()
	defer s.mu.Unlock()
	sent := time.Now()
	if s.dead {
		return sent, errLost("the claimant session failed")
	}
	// Not the keeper's context: pgx closes a connection whose statement is
	// cancelled, which would lose every claim of the session.
	dl, ok := ctx.Deadline()
	if !ok {
		dl = sent.Add(b.o.RequestTimeout)
	}
	rctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	tag, err := s.c.Exec(rctx, b.q(jobsRenewSQL), jc.id, jc.token, b.o.TTL.Milliseconds())
	if err != nil {
		if connLost(err) || s.c.Conn().IsClosed() {
			if !s.dead {
				destroy(s.c)
			}
			s.dead = true
			return sent, errLost("the claimant session failed: %v", err)
		}
		return sent, err
	}
	if tag.RowsAffected() == 1 {
		return sent, nil
	}
	if jc.txAcked.Load() {
		var exists bool
		if err := s.c.QueryRow(rctx, b.q(jobsExistsSQL), jc.id).Scan(&exists); err == nil && !exists {
			// Acked in a caller's transaction that committed: done.
			go jc.q.forget(jc)
			return sent, nil
		}
	}
	return sent, errLost("the claim's row has another token or its lease passed")
}
