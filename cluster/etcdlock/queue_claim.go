package etcdlock

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// reasonLastAttempt is a dead letter's reason when its claimant was lost
// on the job's last attempt.
const reasonLastAttempt = "the claim of its last attempt was lost"

// Claim claims up to n ready jobs, oldest first. Waiting, it sleeps on a
// watch of the queue's directory (a new job, a claim given back) and, when
// a delayed job is next, until its time.
func (d *queueDriver) Claim(ctx context.Context, n int, wait bool) ([]driver.Claim, error) {
	for attempt := 0; ; {
		s, err := d.b.session(ctx)
		if err != nil {
			return nil, err
		}
		cs, rev, next, err := d.gatheredClaim(ctx, s, n, wait)
		switch {
		case err != nil:
			if err := retry(ctx, s, attempt, err); err != nil {
				return nil, err
			}
			attempt++
			continue
		case len(cs) > 0:
			return d.adopt(ctx, cs)
		case rev == 0:
			continue // another claimant came between: read again
		case !wait:
			return nil, baton.ErrEmpty
		}
		if err := d.wait(ctx, rev, next); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil { // errWatch
				return nil, err
			}
		}
	}
}

// tryClaim reads the claims and the first ready jobs of both record
// forms, and claims up to n of those not claimed, oldest first, in one
// transaction. With no job claimed, it returns the revision read when
// none was ready (else 0: read again) and when the next delayed job is
// ready (0: none, or not asked for: a claim that does not wait has no use
// for it, and reading it is range reads more in the claim's first
// request).
func (d *queueDriver) tryClaim(ctx context.Context, s *session, n int, wait bool) ([]driver.Claim, int64, int64, error) {
	spread := int(d.calls.spread.Load())
	limit := n + int(d.calls.width.Load()) + spread
	limit += d.marks() // read past the jobs other claimants here are trying
	whole := false     // read every ready job, not the windows (queue_window.go)
	for {
		now := time.Now().UnixNano()
		upto, ends := now+1, [2]int64{now + 1, now + 1}
		if !whole {
			ends = d.calls.win.ends(upto)
		}
		st := d.calls.win.starts()
		cut := min(ends[0], ends[1])
		if cut < upto {
			windowedReads.Add(1)
		}
		var reads []clientv3.Op
		for i, f := range []string{"r/", "j/"} {
			from := d.dir + f
			if st.at[i] > 0 {
				from = fmt.Sprintf("%s%s%016x", d.dir, f, st.at[i])
			}
			reads = append(reads, clientv3.OpGet(from, clientv3.WithRange(fmt.Sprintf("%s%s%016x", d.dir, f, ends[i])), clientv3.WithLimit(int64(limit))))
		}
		if wait {
			for _, f := range []string{"r/", "j/"} {
				reads = append(reads, clientv3.OpGet(fmt.Sprintf("%s%s%016x", d.dir, f, now+1), clientv3.WithRange(clientv3.GetPrefixRangeEnd(d.dir+f)),
					clientv3.WithLimit(1), clientv3.WithKeysOnly()))
			}
		}
		nr := len(reads)
		from, below := d.calls.hint.get()
		reads = append(reads, d.claimReads(from, below)...)
		rctx, cancel := d.b.rctx(ctx)
		sent := time.Now()
		resp, err := d.b.c.Txn(rctx).Then(reads...).Commit()
		took := time.Since(sent)
		cancel()
		if err != nil {
			return nil, 0, 0, err
		}
		claimed := claimedOf(below, resp.Responses[nr:])
		d.calls.width.Store(int64(len(claimed)))
		rr, jr := resp.Responses[0].GetResponseRange(), resp.Responses[1].GetResponseRange()
		d.calls.win.observe(st, ends, upto, [2]*etcdserverpb.RangeResponse{rr, jr}, limit, d.readyAt, resp.Header.Revision, took)
		ready, more := d.oldest(rr, jr, limit)
		d.calls.hint.set(ready)
		var unclaimed []record
		for _, r := range ready {
			// Past the nearer window's end, a record of the other form
			// may be younger than one not read.
			if !claimed[r.id] && r.at < cut {
				unclaimed = append(unclaimed, r)
			}
		}
		if k := min(spread+1, len(unclaimed)); k > 1 {
			// Other processes' claimants came between lately: start at
			// one of the first few, as they do.
			off := rand.IntN(k)
			unclaimed = append(unclaimed[off:], unclaimed[:off]...)
		}
		order, m := d.reserve(unclaimed, n)
		var picks []record
		budget := maxQueueRequest
		for _, r := range order {
			size := len(r.kv.Value) + jobOverhead
			if len(picks) > 0 && size > budget {
				break
			}
			budget -= size
			picks = append(picks, r)
			if len(picks) == n {
				break
			}
		}
		if len(picks) == 0 {
			d.settle(order[:m], nil)
		}
		if len(picks) == 0 && cut < upto {
			whole = true // none to take in the windows: read to now
			continue
		}
		if len(picks) == 0 && more && limit < n+len(claimed) {
			limit = n + len(claimed) // every job read was claimed: read past them
			continue
		}
		if len(picks) == 0 {
			var next int64
			if wait {
				for _, r := range resp.Responses[2:nr] {
					if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
						if at := d.readyAt(kvs[0].Key); next == 0 || at < next {
							next = at
						}
					}
				}
			}
			return nil, resp.Header.Revision, next, nil
		}
		cs, err := d.claim(ctx, s, picks)
		d.settle(order[:m], cs)
		switch {
		case err == nil && len(cs) == 0 && guessed(from, below, picks):
			// A pick whose claim was not read may have been claimed
			// all along: the next read, which reads it, tells; the
			// choice does not widen for it.
		case err == nil && len(cs) == 0:
			claimConflicts.Add(1)
			d.calls.spread.Store(int64(min(spread+4, spreadMost)))
		case err == nil && spread > 0:
			d.calls.spread.Store(int64(spread - 1))
		}
		return cs, 0, 0, err
	}
}

// oldest merges the first ready records of both forms, each read with
// limit, into the first limit of them all, oldest first (by ready time,
// then id); more reports that there may be others ready after them.
func (d *queueDriver) oldest(r, j *etcdserverpb.RangeResponse, limit int) ([]record, bool) {
	rs := make([]record, 0, len(r.Kvs)+len(j.Kvs))
	for _, kv := range r.Kvs {
		rs = append(rs, d.parseRecord(kv))
	}
	for _, kv := range j.Kvs {
		rs = append(rs, d.parseRecord(kv))
	}
	slices.SortFunc(rs, func(a, b record) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id))
	})
	more := r.More || j.More || len(rs) > limit
	return rs[:min(len(rs), limit)], more
}

// claim claims the picked jobs if none changed since read and none is
// claimed; a job whose last attempt's claim was lost becomes a dead letter
// instead. The first claim of a job whose uniqueness key its Put wrote
// writes the job's id in the key, so that every later use of the key (a
// duplicate Put of the earlier format, dropKey) finds it there.
func (d *queueDriver) claim(ctx context.Context, s *session, picks []record) ([]driver.Claim, error) {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	var ckeys, gkeys, rkeys []string
	var jobs []qjob
	for _, r := range picks {
		kv, id := r.kv, r.id
		j, err := decodeJob(id, r.at, kv.Value)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", id, err)
		}
		ck := d.ckey(id)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision),
			clientv3.Compare(clientv3.CreateRevision(ck), "=", 0))
		if j.attempts >= j.max {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)), clientv3.OpPut(d.dkey(id), string(deadRecord(j, reasonLastAttempt, time.Now()))))
			ops = append(ops, d.dropKey(j)...)
			continue
		}
		if r.pos >= 0 && j.key != "" {
			kk := d.kkey(j.key)
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(kk), "=", kv.CreateRevision),
				clientv3.Compare(clientv3.Value(kk), "=", "@"+strconv.Itoa(r.pos))},
				[]clientv3.Op{clientv3.OpPut(kk, strconv.FormatUint(id, 10))}, nil))
		}
		j.attempts++
		holder := d.b.claimValue(s.newID())
		ops = append(ops, clientv3.OpPut(ck, holder, clientv3.WithLease(s.id)), clientv3.OpPut(string(kv.Key), string(j.encode())))
		ckeys, gkeys, rkeys = append(ckeys, ck), append(gkeys, guardKey(ck, holder)), append(rkeys, string(kv.Key))
		jobs = append(jobs, j)
	}
	resp, err := d.b.commit(ctx, s, gkeys, func(rctx context.Context) (*clientv3.TxnResponse, error) {
		return d.b.c.Txn(rctx).If(cmps...).Then(ops...).Commit()
	})
	if err != nil || !resp.Succeeded {
		return nil, err
	}
	rev := resp.Header.Revision
	out := make([]driver.Claim, 0, len(jobs))
	for k, j := range jobs {
		loss := driver.NewLoss()
		s.track(loss, ckeys[k], rev)
		c := &qclaim{s: s, job: j, ckey: ckeys[k], gkey: gkeys[k], rkey: rkeys[k], rev: rev, loss: loss, hw: d.b.watchHold(s, ckeys[k], rev, loss)}
		out = append(out, driver.Claim{ID: j.id, Payload: j.payload, Attempt: j.attempts, MaxAttempts: j.max,
			Token: uint64(rev)<<tokenBits | uint64(k), Loss: loss, Data: c})
	}
	return out, nil
}

// adopt makes claims the handle's own, given back at its Close; a handle
// closed meanwhile, or a caller gone (a claim shared with others runs to
// its end), gives them back instead: a cancelled Claim claims nothing.
func (d *queueDriver) adopt(ctx context.Context, cs []driver.Claim) ([]driver.Claim, error) {
	d.mu.Lock()
	closed := d.closed
	keep := !closed && ctx.Err() == nil
	if keep {
		for _, c := range cs {
			d.claims[c.Data.(*qclaim)] = struct{}{}
		}
	}
	d.mu.Unlock()
	if keep {
		return cs, nil
	}
	for _, dc := range cs {
		c := dc.Data.(*qclaim)
		d.unmarkKey(c.rkey)
		c.hw.release()
		c.loss.Fire(baton.ErrClosed)
		c.s.untrack(c.loss)
		d.b.cleanup(c.s, c.gkey)
	}
	if closed {
		return nil, fmt.Errorf("etcdlock: %w", baton.ErrClosed)
	}
	return nil, ctx.Err()
}

// Stats counts in one read: jobs ready by now, those later (of both
// record forms), claims and dead letters.
func (d *queueDriver) Stats(ctx context.Context) (driver.QueueStats, error) {
	now := time.Now().UnixNano()
	var reads []clientv3.Op
	for _, f := range []string{"r/", "j/"} {
		from, upto := d.dir+f, fmt.Sprintf("%s%s%016x", d.dir, f, now+1)
		reads = append(reads, clientv3.OpGet(from, clientv3.WithRange(upto), clientv3.WithCountOnly()),
			clientv3.OpGet(upto, clientv3.WithRange(clientv3.GetPrefixRangeEnd(from)), clientv3.WithCountOnly()))
	}
	reads = append(reads, clientv3.OpGet(d.dir+"c/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(d.dir+"d/", clientv3.WithPrefix(), clientv3.WithCountOnly()))
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	resp, err := d.b.c.Txn(rctx).Then(reads...).Commit()
	if err != nil {
		return driver.QueueStats{}, err
	}
	count := func(i int) int { return int(resp.Responses[i].GetResponseRange().Count) }
	return driver.QueueStats{Ready: max(0, count(0)+count(2)-count(4)), Delayed: count(1) + count(3), InFlight: count(4), Dead: count(5)}, nil
}

// Dead lists dead letters, oldest (lowest id) first.
func (d *queueDriver) Dead(ctx context.Context, limit int) ([]driver.DeadJob, error) {
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	resp, err := d.b.c.Get(rctx, d.dir+"d/", clientv3.WithPrefix(), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	var out []driver.DeadJob
	for _, kv := range resp.Kvs {
		_, dl, err := decodeDead(parseID(kv.Key), kv.Value)
		if err != nil {
			continue // not written by this driver
		}
		out = append(out, driver.DeadJob{ID: uint64(dl.ID), Payload: dl.Payload, Attempts: dl.Attempts, Reason: dl.Reason, At: dl.At})
	}
	return out, nil
}

// Requeue makes each dead letter ready now, attempts from zero, taking
// its uniqueness key back if no pending job has it.
func (d *queueDriver) Requeue(ctx context.Context, ids []uint64) (int, error) {
	n := 0
	for _, id := range ids {
		rctx, cancel := d.b.rctx(ctx)
		dk := d.dkey(id)
		resp, err := d.b.c.Get(rctx, dk)
		if err != nil || len(resp.Kvs) == 0 {
			cancel()
			if err != nil {
				return n, err
			}
			continue
		}
		j, _, err := decodeDead(id, resp.Kvs[0].Value)
		if err != nil {
			cancel()
			continue
		}
		j.attempts, j.at = 0, time.Now().UnixNano()
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(dk), "=", resp.Kvs[0].ModRevision)}
		ops := []clientv3.Op{clientv3.OpDelete(dk), clientv3.OpPut(d.rkey(j.at, id), string(j.encode()))}
		if j.key != "" {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(d.kkey(j.key)), "=", 0))
			ops = append(ops, clientv3.OpPut(d.kkey(j.key), fmt.Sprint(id)))
		}
		tr, err := d.b.c.Txn(rctx).If(cmps...).Then(ops...).Commit()
		cancel()
		if err != nil {
			return n, err
		}
		if tr.Succeeded {
			n++
		}
	}
	return n, nil
}

// Purge deletes dead letters, a transaction per hundred ids.
func (d *queueDriver) Purge(ctx context.Context, ids []uint64) (int, error) {
	n := 0
	for len(ids) > 0 {
		part := ids[:min(100, len(ids))]
		ids = ids[len(part):]
		ops := make([]clientv3.Op, len(part))
		for i, id := range part {
			ops[i] = clientv3.OpDelete(d.dkey(id))
		}
		rctx, cancel := d.b.rctx(ctx)
		resp, err := d.b.c.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return n, err
		}
		for _, r := range resp.Responses {
			n += int(r.GetResponseDeleteRange().Deleted)
		}
	}
	return n, nil
}
