package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
)

// An end of a claim (Ack, Retry, a last attempt's dead letter) is one
// transaction. When its request fails, the server may still have applied
// it: the caller gets the error and may end the claim again, and that
// later try finds the claim key gone. Reporting ErrLost then would say
// that the claim was lost and nothing changed, when the job was in fact
// acked or put back by the earlier try. So the later try reads the
// server's history instead: the claim key's first delete after the claim
// was written, and whether that revision deleted the job's record too,
// which only an end of this claim does (a lapsed lease or Close deletes
// the claim key alone).

// endTry is an end of a claim whose request failed.
type endTry struct {
	put string // the key it puts: the record put back, or the dead letter; "" for an Ack
}

// errEndedBefore is what an end gets when an earlier end of another kind
// whose outcome was unknown took effect.
var errEndedBefore = errors.New("an earlier end of the claim, whose outcome was unknown, took effect")

// settleEnd decides a try e of ending c that found the claim key gone after
// earlier tries (c.unsure) failed. done reports that one of them was
// applied: err is then nil when it did what e does, else an error matching
// baton.ErrNotHeld. When none was, settleEnd returns false and nil, and the
// claim was lost. When the history needed is compacted, or cannot be
// read, err says that the outcome is still unknown.
func (d *queueDriver) settleEnd(ctx context.Context, c *qclaim, e endTry) (done bool, err error) {
	at, err := d.firstDelete(ctx, c.ckey, c.rev)
	if err != nil {
		return false, fmt.Errorf("job %d: the claim's key is gone and whether an earlier end took effect is unknown: %w", c.job.id, err)
	}
	before, err := d.existsAt(ctx, c.rkey, at-1)
	if err != nil {
		return false, err
	}
	after, err := d.existsAt(ctx, c.rkey, at)
	if err != nil {
		return false, err
	}
	if !before || after {
		return false, nil // the key went alone: the claim was lost
	}
	applied, found := endTry{}, false
	for _, t := range c.unsure {
		if t.put == "" {
			continue
		}
		kv, err := d.getAt(ctx, t.put, at)
		if err != nil {
			return false, err
		}
		if kv != nil && kv.ModRevision == at {
			applied, found = t, true
		}
	}
	if !found && !hasAck(c.unsure) {
		return false, fmt.Errorf("job %d: the claim ended at revision %d by no end of this claim's", c.job.id, at)
	}
	if (applied.put == "") != (e.put == "") {
		return true, fmt.Errorf("%w: job %d: %w", baton.ErrNotHeld, c.job.id, errEndedBefore)
	}
	return true, nil
}

func hasAck(ts []endTry) bool {
	for _, t := range ts {
		if t.put == "" {
			return true
		}
	}
	return false
}

// firstDelete returns the revision of the first delete of key after rev.
func (d *queueDriver) firstDelete(ctx context.Context, key string, rev int64) (int64, error) {
	wctx, cancel := d.b.rctx(ctx)
	defer cancel()
	wch := d.b.c.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return 0, err
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				return ev.Kv.ModRevision, nil
			}
		}
	}
	if err := wctx.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("the watch ended")
}

// getAt reads key as it was at revision rev (nil: absent).
func (d *queueDriver) getAt(ctx context.Context, key string, rev int64) (*mvccpb.KeyValue, error) {
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	resp, err := d.b.c.Get(rctx, key, clientv3.WithRev(rev))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0], nil
}

func (d *queueDriver) existsAt(ctx context.Context, key string, rev int64) (bool, error) {
	kv, err := d.getAt(ctx, key, rev)
	return kv != nil, err
}
