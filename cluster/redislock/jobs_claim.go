package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Claim claims up to n ready jobs. It runs the claim script first, so a
// claim that finds a job ready costs one script and no subscription. Only
// when nothing was ready does a waiting claim subscribe to the queue's
// channel and run the script again: a Put between the first try and the
// subscription is found by the second, a Put after it is announced. It
// then sleeps until a message, the time the script said the next delayed
// job is ready or the next lease passes, or a renewal period at most (a
// message lost with a broken Pub/Sub connection is made up for then, as
// for values).
func (q *queueDriver) Claim(ctx context.Context, n int, wait bool) ([]driver.Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cs, _, err := q.claimOnce(ctx, n, 0)
	if err != nil || len(cs) > 0 {
		return cs, err
	}
	if !wait {
		return nil, baton.ErrEmpty
	}
	vs, err := q.d.valueSubs()
	if err != nil {
		return nil, err
	}
	wake, leave, err := vs.join(ctx, q.channel)
	if err != nil {
		return nil, err
	}
	defer leave()
	// Puts announce themselves only while a claimant said it may wait: up
	// to a renewal period and a request before it runs the script again.
	waitMS := (q.d.o.RenewEvery + q.d.o.RequestTimeout).Milliseconds()
	for {
		cs, next, err := q.claimOnce(ctx, n, waitMS)
		if err != nil || len(cs) > 0 {
			return cs, err
		}
		d := q.d.o.RenewEvery
		if next > 0 {
			d = min(d, next)
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

// claimOnce runs the claim script once. It runs to its end even when ctx
// ends meanwhile (bounded by the request timeout), so that what it claimed
// is given back rather than left to its lease: a cancelled Claim claims
// nothing. next is when to look again (0: no delayed job nor claim);
// waitMS, when positive, how long the caller may then wait on the channel.
func (q *queueDriver) claimOnce(ctx context.Context, n int, waitMS int64) ([]driver.Claim, time.Duration, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.d.o.RequestTimeout)
	defer cancel()
	var v any
	var acked bool
	var err error
	var sent time.Time
	if waitMS == 0 {
		v, acked, sent, err = q.claimGathered(rctx, n)
	} else {
		sent = time.Now()
		v, acked, err = q.runKeys(rctx, scriptJobsClaim, jobsKeysClaim, n, q.d.ttlMS(), waitMS)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, err
	}
	r, _ := v.([]any)
	if len(r) < 1 || (len(r)-1)%4 != 0 {
		return nil, 0, fmt.Errorf("jobs_claim replied %v", v)
	}
	if len(r) == 1 {
		w, _ := r[0].(int64)
		return nil, time.Duration(max(w, 0)) * time.Millisecond, nil
	}
	cs := make([]driver.Claim, 0, (len(r)-1)/4)
	jcs := make([]*jobClaim, 0, cap(cs))
	var perr error
	for i := 1; i < len(r); i += 4 {
		id, _ := r[i].(string)
		payload, _ := r[i+1].(string)
		info, _ := r[i+2].(string)
		tok, _ := r[i+3].(string)
		// info is "attempts|max attempts|sequence|key" (jobs_common.lua).
		attempt, rest, ok1 := strings.Cut(info, "|")
		maxA, rest, ok2 := strings.Cut(rest, "|")
		_, key, ok3 := strings.Cut(rest, "|")
		nid, err1 := strconv.ParseUint(id, 10, 64)
		ntok, err2 := strconv.ParseUint(tok, 10, 64)
		na, err3 := strconv.Atoi(attempt)
		nm, err4 := strconv.Atoi(maxA)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !ok1 || !ok2 || !ok3 {
			perr = fmt.Errorf("jobs_claim replied %v", r[i:i+4])
		}
		jc := &jobClaim{id: id, token: tok, key: key, sent: sent, loss: driver.NewLoss()}
		jcs = append(jcs, jc)
		cs = append(cs, driver.Claim{ID: nid, Payload: []byte(payload), Attempt: na, MaxAttempts: nm, Token: ntok, Loss: jc.loss, Data: jc})
	}
	switch {
	case perr != nil:
	case !acked:
		perr = fmt.Errorf("%w (%d wanted within %d ms); the claims were given back", ErrNotReplicated, q.d.o.rep.replicas, q.d.o.rep.waitMS)
	case ctx.Err() != nil:
		perr = ctx.Err()
	}
	q.mu.Lock()
	closed := q.closed
	if perr == nil && !closed {
		for _, jc := range jcs {
			q.hold(jc)
		}
	}
	q.mu.Unlock()
	if perr == nil && closed {
		perr = errClosed
	}
	if perr != nil {
		q.giveBack(jcs)
		return nil, 0, perr
	}
	return cs, 0, nil
}

// giveBack gives back claims never handed to the caller.
func (q *queueDriver) giveBack(jcs []*jobClaim) {
	args := []any{q.channel}
	for _, jc := range jcs {
		args = append(args, jc.id, jc.token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.d.o.RequestTimeout)
	defer cancel()
	if err := scriptJobsGiveBack.Run(ctx, q.d.c, q.keys, args...).Err(); err != nil {
		q.d.o.Logger.Warn("redislock: giving back claims failed; they return when their lease passes",
			"name", q.name, "err", err)
	}
}
