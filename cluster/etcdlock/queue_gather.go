package etcdlock

import (
	"context"
	"sync/atomic"

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

// claimGatherMost is the most jobs one gathered transaction claims: with
// their uniqueness keys, their operations stay within the server's default
// --max-txn-ops. A larger batch Claim runs alone, as before.
const claimGatherMost = 32

// queueCalls is what the handles of one queue in one Backend share.
type queueCalls struct {
	claims batch.Gather[claimCall]
	width  atomic.Int64 // in-flight claims at the last read
}

// claimCall is a claim of up to n jobs (wait: the caller would wait for
// one), and what its transaction gave it.
type claimCall struct {
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
	c := &batch.Gathered[claimCall]{V: claimCall{n: n, wait: wait}}
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
	total, wait := 0, false
	for _, c := range calls {
		total += c.V.n
		wait = wait || c.V.wait
	}
	cs, rev, next, err := d.tryClaim(context.WithoutCancel(ctx), s, total, wait)
	for _, c := range calls {
		k := min(c.V.n, len(cs))
		c.V.cs, cs = cs[:k:k], cs[k:]
		c.V.err = err
		if k == 0 && err == nil && rev != 0 {
			c.V.rev, c.V.next = rev, next
		}
	}
}
