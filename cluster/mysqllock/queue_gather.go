package mysqllock

import (
	"context"
	"time"

	"github.com/batonlock/baton/cluster/internal/batch"
	"github.com/batonlock/baton/driver"
)

// The claims of the handles of one queue in one Backend are gathered:
// while a claim runs, the claims that come wait for the next one, which
// claims for all of them at once, the oldest jobs to the first to come.
// Every claim writes the queue's token row, whose lock makes concurrent
// claims run one after another anyway, each paying its own round trips
// and commit. The jobs of one statement share its owner; each handle
// renews and ends its own.

// claimGatherMost is the most jobs one claim statement takes.
const claimGatherMost = 64

// queueCalls is what the handles of one queue in one Backend share.
type queueCalls struct {
	claims batch.Gather[claimCall]
}

// claimCall is a claim of up to n jobs, and what the statement gave it.
type claimCall struct {
	n   int
	got taken
	due time.Duration // with no job got: when to look again (0: unknown)
	err error
}

// claimGathered claims up to n jobs in a statement shared with the
// claims of the queue's other handles that come while one runs. The
// statement runs to its end whatever the callers' contexts do.
func (d *queueDriver) claimGathered(n int) ([]driver.Claim, time.Duration, error) {
	c := &batch.Gathered[claimCall]{V: claimCall{n: n}}
	d.calls.claims.Do(c, claimGatherMost, func(c *claimCall) int { return c.n }, d.claimBatch)
	if c.V.err != nil || len(c.V.got.got) == 0 {
		return nil, c.V.due, c.V.err
	}
	t := c.V.got
	return d.newClaims(t.got, t.owner, t.last, t.sent), 0, nil
}

// claimBatch claims for a batch of calls in one statement and gives each
// call its share, in order of arrival.
func (d *queueDriver) claimBatch(batch []*batch.Gathered[claimCall]) {
	total := 0
	for _, c := range batch {
		total += c.V.n
	}
	bctx, cancel := d.b.bg(context.Background())
	t, due, err := d.tryClaim(bctx, total)
	cancel()
	rest := t.got
	for _, c := range batch {
		c.V.err = err
		if err != nil {
			continue
		}
		k := min(c.V.n, len(rest))
		if k == 0 {
			c.V.due = due
			continue
		}
		// The jobs after this call's hold the last tokens.
		c.V.got = taken{got: rest[:k:k], owner: t.owner, last: t.last - uint64(len(rest)-k), sent: t.sent}
		rest = rest[k:]
	}
}
