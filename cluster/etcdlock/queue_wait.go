package etcdlock

import (
	"context"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// wait sleeps until the queue may have a job ready after revision rev: a
// job put, a claim given back (deleted without its job), or next (a
// delayed job's time, Unix ns; 0 for none). It returns nil to read again.
//
// The watch starts after the last read from the first record, so that it
// also sees the records put below the floors since (queue_window.go).
func (d *queueDriver) wait(ctx context.Context, rev, next int64) error {
	from := rev
	if f := d.calls.win.fullRevision(); f > 0 {
		from = min(from, f)
	}
	w := d.b.watch(ctx, d.dir, clientv3.WithPrefix(), clientv3.WithRev(from+1))
	defer w.stop()
	tctx := ctx
	if next > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithDeadline(ctx, time.Unix(0, next))
		defer cancel()
	}
	for {
		wr, err := w.next(tctx, nil)
		if err != nil {
			if ctx.Err() == nil && tctx.Err() != nil {
				return nil // the delayed job is ready
			}
			if wr.CompactRevision > 0 {
				d.calls.win.forceFull() // what the watch would replay is gone
			}
			return err
		}
		if wr.Created {
			continue // the events from the revision asked for follow
		}
		if d.wakes(wr.Events, rev) {
			return nil
		}
	}
}

// wakes reports whether events may have made a job ready: a new job
// record, or a claim key deleted in a revision that did not delete its job
// (an Ack), after rev; or a new record below a floor, at any revision.
func (d *queueDriver) wakes(evs []*clientv3.Event, rev int64) bool {
	acked, below := map[int64]bool{}, false
	rp, jp, cp := d.dir+"r/", d.dir+"j/", d.dir+"c/"
	isRecord := func(k string) bool { return strings.HasPrefix(k, rp) || strings.HasPrefix(k, jp) }
	for _, ev := range evs {
		k := string(ev.Kv.Key)
		switch {
		case ev.Type == mvccpb.DELETE && isRecord(k):
			acked[ev.Kv.ModRevision] = true
		case ev.Type == mvccpb.PUT && ev.Kv.Version == 1 && isRecord(k):
			// A record below its form's floor (a producer's clock
			// behind), even one put before the read: the next reads
			// start at it.
			if d.calls.win.lower(boolIndex(strings.HasPrefix(k, jp)), d.readyAt(ev.Kv.Key)) {
				below = true
			}
		}
	}
	if below {
		return true
	}
	for _, ev := range evs {
		k := string(ev.Kv.Key)
		switch {
		case ev.Kv.ModRevision <= rev:
		case ev.Type == mvccpb.PUT && ev.Kv.Version == 1 && isRecord(k):
			return true
		case ev.Type == mvccpb.DELETE && strings.HasPrefix(k, cp) && !acked[ev.Kv.ModRevision]:
			return true
		}
	}
	return false
}

// boolIndex is 1 for true, 0 for false.
func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}
