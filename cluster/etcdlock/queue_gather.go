package etcdlock

import (
	"context"
	"slices"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton/cluster/internal/batch"
	"github.com/batonlock/baton/driver"
)

// Claims of the handles of one queue in one Backend are gathered: while a
// claim's read and transaction run, the claims that come wait for the
// next, which claims for all of them in one read and one transaction and
// gives the oldest jobs to the first to come. Claims one by one would
// read the same oldest jobs and all but one find them taken; gathered,
// they are served in their order of arrival. A lone claim makes the
// requests it made before. All claims of a Backend are bound to its one
// session's lease, so sharing a transaction binds each to nothing else.

// The ends of claims (Ack, Retry, a last attempt's dead letter) are
// gathered too: each is a transaction of its own nested in one request,
// which ends the claims still held and leaves the others as they are.

// claimGatherMost is the most jobs one gathered transaction claims: with
// their uniqueness keys, their operations stay within the server's default
// --max-txn-ops. A larger batch Claim runs alone, as before.
const claimGatherMost = 32

// endGatherMost is the most claims one request ends: one operation each
// at the request's top level.
const endGatherMost = 64

// queueCalls is what the handles of one queue in one Backend share.
type queueCalls struct {
	claims batch.Gather[claimCall]
	ends   batch.Gather[endCall]
	width  atomic.Int64 // in-flight claims at the last read
	win    windows      // where reads of ready jobs start and end (queue_window.go)
	hint   claimHint    // the records the last read chose among (queue_hint.go)
	// How many of the oldest unclaimed jobs a claim chooses among, less
	// one: four more for each claim that found its job taken by another
	// process's claimant, one fewer for each that did not, so that
	// claimants of several processes mostly take different jobs.
	spread atomic.Int64
}

// spreadMost bounds spread.
const spreadMost = 16

// endCall ends claim c with ops if the claim still holds its key, and
// reports whether it did.
type endCall struct {
	c   *qclaim
	ops []clientv3.Op
	ok  bool
	err error
}

// claimCall is a claim of up to n jobs (wait: the caller would wait for
// one), and what its transaction gave it.
type claimCall struct {
	ctx       context.Context
	n         int
	wait      bool
	cs        []driver.Claim
	rev, next int64
	err       error
}

// gatheredClaim runs tryClaim for this claim and those of the queue's
// other handles that came meanwhile. With no job for this claim, rev and
// next are tryClaim's (rev 0: read again, as when the batch's jobs went
// to the calls before it).
func (d *queueDriver) gatheredClaim(ctx context.Context, s *session, n int, wait bool) ([]driver.Claim, int64, int64, error) {
	c := &batch.Gathered[claimCall]{V: claimCall{ctx: ctx, n: n, wait: wait}}
	d.calls.claims.Do(c, claimGatherMost, func(c *claimCall) int { return c.n }, func(calls []*batch.Gathered[claimCall]) {
		if len(calls) == 1 {
			c.V.cs, c.V.rev, c.V.next, c.V.err = d.tryClaim(ctx, s, n, wait)
			return
		}
		d.claimFor(ctx, s, calls)
	})
	return c.V.cs, c.V.rev, c.V.next, c.V.err
}

// claimFor claims for a batch of calls at once, and gives each its jobs
// in order of arrival. It does not end with the context of the call that
// runs it, whose caller may be gone while the others still want their
// jobs: a request timeout bounds it, and each caller gives back what it
// got if its own context ended meanwhile (adopt).
func (d *queueDriver) claimFor(ctx context.Context, s *session, calls []*batch.Gathered[claimCall]) {
	// A call whose caller left while it waited takes no part: its jobs
	// would only be given back, a claimed attempt each.
	live := make([]*batch.Gathered[claimCall], 0, len(calls))
	total, wait := 0, false
	for _, c := range calls {
		if c.V.err = c.V.ctx.Err(); c.V.err != nil {
			continue
		}
		live = append(live, c)
		total += c.V.n
		wait = wait || c.V.wait
	}
	if total == 0 {
		return
	}
	cs, rev, next, err := d.tryClaim(context.WithoutCancel(ctx), s, total, wait)
	for _, c := range live {
		k := min(c.V.n, len(cs))
		c.V.cs, cs = cs[:k:k], cs[k:]
		c.V.err = err
		if k == 0 && err == nil && rev != 0 {
			c.V.rev, c.V.next = rev, next
		}
	}
}

// gatheredEnd runs c's end, in one request with the ends of the queue's
// other handles that come while one runs. A request shared with others
// runs to its end even when ctx ends meanwhile (bounded by the request
// timeout).
func (d *queueDriver) gatheredEnd(ctx context.Context, c *qclaim, ops []clientv3.Op) (bool, error) {
	e := &batch.Gathered[endCall]{V: endCall{c: c, ops: ops}}
	d.calls.ends.Do(e, endGatherMost, func(*endCall) int { return 1 }, func(calls []*batch.Gathered[endCall]) {
		if len(calls) == 1 {
			e.V.ok, e.V.err = d.endTxn(ctx, c, ops)
			return
		}
		d.endFor(context.WithoutCancel(ctx), calls)
	})
	return e.V.ok, e.V.err
}

// endTxn ends one claim in a transaction of its own.
func (d *queueDriver) endTxn(ctx context.Context, c *qclaim, ops []clientv3.Op) (bool, error) {
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	resp, err := d.b.c.Txn(rctx).If(endCmp(c)).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func endCmp(c *qclaim) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.ckey), "=", c.rev)
}

// endFor ends a batch of claims in one request, each in a nested
// transaction. The server refuses a request in which a key one operation
// puts is put or deleted by another, so ends that name a key in common
// (two claims of one job, the earlier lost, ending together; two jobs
// naming one uniqueness key) end one by one.
func (d *queueDriver) endFor(ctx context.Context, calls []*batch.Gathered[endCall]) {
	seen := map[string]bool{}
	var nested []clientv3.Op
	var together, alone []*batch.Gathered[endCall]
	for _, e := range calls {
		keys := []string{e.V.c.ckey, e.V.c.rkey}
		if e.V.c.job.key != "" {
			keys = append(keys, d.kkey(e.V.c.job.key))
		}
		if slices.ContainsFunc(keys, func(k string) bool { return seen[k] }) {
			alone = append(alone, e)
			continue
		}
		for _, k := range keys {
			seen[k] = true
		}
		together = append(together, e)
		nested = append(nested, clientv3.OpTxn([]clientv3.Cmp{endCmp(e.V.c)}, e.V.ops, nil))
	}
	rctx, cancel := d.b.rctx(ctx)
	resp, err := d.b.c.Txn(rctx).Then(nested...).Commit()
	cancel()
	for i, e := range together {
		if e.V.err = err; err == nil {
			e.V.ok = resp.Responses[i].GetResponseTxn().Succeeded
		}
	}
	for _, e := range alone {
		e.V.ok, e.V.err = d.endTxn(ctx, e.V.c, e.V.ops)
	}
}
