package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
)

// An end of a claim (Ack, Retry, a last attempt's dead letter) is one
// multi-op. When its request fails (the connection is lost before the
// answer), the server may still have applied it: the caller gets the
// error and may end the claim again, and that later try finds the claim
// node gone. Reporting ErrLost then would say that the claim was lost and
// nothing changed, when the job was in fact acked or put back. The claim
// node is ephemeral: while the claim's epoch has not ended, the session
// that owns the node lives, so the node can only have gone by a delete,
// and only an end of this claim deletes it (Close gives a claim back
// after its loss has fired, which stops the ends first).

// endTry is an end of a claim whose request failed.
type endTry struct {
	put string // the node it makes: the record put back, or the dead letter; "" for an Ack
}

// errEndedBefore is what an end gets when an earlier end of another kind
// whose outcome was unknown took effect.
var errEndedBefore = errors.New("an earlier end of the claim, whose outcome was unknown, took effect")

// settleEnd decides a try e of ending c that conflicted after earlier
// tries (c.unsure) failed. done reports that one of them was applied: err
// is then nil when it did what e does, else an error matching
// baton.ErrNotHeld. When none was, settleEnd returns false and nil, and
// the claim was lost. When which one was applied cannot be told, err
// says that the outcome is unknown.
func (d *queueDriver) settleEnd(ctx context.Context, c *qclaim, e endTry) (done bool, err error) {
	mine, err := req(d.b, ctx, func() (bool, error) {
		data, _, err := d.b.c.Get(d.c(c.job.id))
		if errors.Is(err, zk.ErrNoNode) {
			return false, nil
		}
		return string(data) == c.holder, err
	})
	if err != nil {
		return false, err
	}
	if mine || c.e.ended() != nil {
		// The node is still the claim's (what conflicted is the record),
		// or it may have gone with the session: lost. (A node of another
		// claim is a later claim of the job, put back by one of the
		// tries.)
		return false, nil
	}
	// Every end deletes the record the claim wrote: one still there was
	// not ended (its claim node went some other way).
	kept, err := req(d.b, ctx, func() (bool, error) {
		ok, _, err := d.b.c.Exists(d.r(c.rname))
		return ok, err
	})
	if err != nil || kept {
		return false, err
	}
	var acked, retried, made bool
	for _, t := range c.unsure {
		if t.put == "" {
			acked = true
			continue
		}
		retried = true
		ok, err := req(d.b, ctx, func() (bool, error) {
			ok, _, err := d.b.c.Exists(t.put)
			return ok, err
		})
		if err != nil {
			return false, err
		}
		made = made || ok
	}
	// A job put back may have been claimed and acked since: its node is
	// gone then, which tells nothing when an Ack was tried too.
	switch {
	case made || retried && !acked:
		retried, acked = true, false
	case !acked:
		return false, fmt.Errorf("job %d: the claim's node is gone and whether an earlier end took effect is unknown", c.job.id)
	case retried:
		return false, fmt.Errorf("job %d: the claim's node is gone and which earlier end took effect is unknown", c.job.id)
	}
	if acked != (e.put == "") {
		return true, fmt.Errorf("%w: job %d: %w", baton.ErrNotHeld, c.job.id, errEndedBefore)
	}
	return true, nil
}
