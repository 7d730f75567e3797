package zklock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// reasonLastAttempt is a dead letter's reason when its claimant was lost
// on the job's last attempt.
const reasonLastAttempt = "the claim of its last attempt was lost"

// Claim claims up to n ready jobs, oldest first. Waiting, it sleeps on
// child watches of the records (a job put) and of the claims (a claim
// given back) and, when a delayed job is next, until its time.
func (d *queueDriver) Claim(ctx context.Context, n int, wait bool) ([]driver.Claim, error) {
	for {
		e, err := call(d.b, ctx, d.b.epoch)
		if err != nil {
			return nil, err
		}
		names, claimed, next, rw, cw, err := d.read(ctx, wait)
		if errors.Is(err, zk.ErrNoNode) {
			if !wait {
				return nil, baton.ErrEmpty // nothing was ever put
			}
			if _, err := req(d.b, ctx, func() (struct{}, error) { return struct{}{}, d.ensure() }); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		var picks []string
		for _, name := range names {
			if _, id, _ := parseR(name); !claimed[id] {
				picks = append(picks, name)
			}
		}
		if len(picks) > 0 {
			picks, m := d.reserve(d.spreadOut(picks), n)
			cs, err := d.claim(ctx, e, picks, n)
			d.settle(picks[:m], cs)
			if err == nil {
				d.conflicted(len(cs) == 0)
			}
			if err != nil || len(cs) > 0 {
				return cs, err
			}
			claimConflicts.Add(1)
			d.mu.Lock()
			d.noClaims = false
			d.mu.Unlock()
			continue // another claimant came between: read again
		}
		if !wait {
			return nil, baton.ErrEmpty
		}
		if err := d.sleep(ctx, e, next, rw, cw); err != nil {
			return nil, err
		}
	}
}

// sleep waits for a watch, the time next (Unix ns; 0: none), the end of
// the epoch (the next round begins another) or ctx.
func (d *queueDriver) sleep(ctx context.Context, e *epoch, next int64, rw, cw <-chan zk.Event) error {
	var timer <-chan time.Time
	if next > 0 {
		t := time.NewTimer(time.Until(time.Unix(0, next)))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-rw:
	case <-cw:
	case <-timer:
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// read lists the records ready by now, oldest first, the claimed ids and
// when the next delayed job is ready (0: none); with watch it also sets
// child watches of records and claims.
func (d *queueDriver) read(ctx context.Context, watch bool) ([]string, map[uint64]bool, int64, <-chan zk.Event, <-chan zk.Event, error) {
	type res struct {
		names []string
		ch    <-chan zk.Event
	}
	list := func(path string) (res, error) {
		return req(d.b, ctx, func() (res, error) {
			if watch {
				ns, _, ch, err := d.b.c.ChildrenW(path)
				return res{ns, ch}, err
			}
			ns, _, err := d.b.c.Children(path)
			return res{ns, nil}, err
		})
	}
	// The two lists in one round trip (the connection pipelines them):
	// they need not be one snapshot, since the claim's multi-op checks
	// both the record's version and the claim node's absence.
	type listed struct {
		res
		err error
	}
	d.mu.Lock()
	skip := !watch && d.noClaims
	d.mu.Unlock()
	var rs, cs res
	var err error
	if skip {
		rs, err = list(d.dir + "/r")
	} else {
		claims := make(chan listed, 1)
		go func() {
			r, err := list(d.dir + "/c")
			claims <- listed{r, err}
		}()
		var rerr error
		rs, rerr = list(d.dir + "/r")
		c := <-claims
		cs, err = c.res, c.err
		if err == nil {
			err = rerr
		}
		if err == nil {
			d.mu.Lock()
			d.noClaims = len(cs.names) == 0
			d.mu.Unlock()
		}
	}
	if err != nil {
		return nil, nil, 0, nil, nil, err
	}
	claimed := make(map[uint64]bool, len(cs.names))
	for _, c := range cs.names {
		id, _ := strconv.ParseUint(c, 16, 64)
		claimed[id] = true
	}
	sort.Strings(rs.names)
	now := time.Now().UnixNano()
	var ready []string
	var next int64
	for _, name := range rs.names {
		at, _, ok := parseR(name)
		if !ok {
			continue
		}
		if at > now {
			next = at
			break
		}
		ready = append(ready, name)
	}
	return ready, claimed, next, rs.ch, cs.ch, nil
}

// claim reads the picked records, up to n of them within one request's
// size, and claims them in one multi-op if none changed and none is
// claimed; a job whose last attempt's claim was lost becomes a dead letter
// instead. It returns no claim and no error when another client came
// between.
func (d *queueDriver) claim(ctx context.Context, e *epoch, picks []string, n int) ([]driver.Claim, error) {
	var ops []any
	var jobs []qjob
	var names []string
	var holders []string
	budget := maxZKRequest
	for _, name := range picks {
		if len(jobs) == n {
			break
		}
		at, id, _ := parseR(name)
		v, st, err := d.get(ctx, d.r(name))
		if errors.Is(err, zk.ErrNoNode) {
			// The read is stale: the next records of it are likely
			// gone too, and another read costs what one get does.
			staleReads.Add(1)
			d.gone(name)
			break
		}
		if err != nil {
			return nil, err
		}
		if len(jobs) > 0 && len(v)+zkJobOverhead > budget {
			break
		}
		budget -= len(v) + zkJobOverhead
		j, err := decodeJob(id, at, v)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", id, err)
		}
		if j.attempts >= j.max {
			kops, err := d.keyOps(ctx, j)
			if err != nil {
				return nil, err
			}
			// Only if nobody holds the job: the claim node made and
			// deleted in the multi-op fails it when a claim has it (the
			// claims were listed apart from the record, or not at all).
			ops = append(ops, &zk.CreateRequest{Path: d.c(id), Acl: d.b.acl}, &zk.DeleteRequest{Path: d.c(id), Version: -1},
				&zk.DeleteRequest{Path: d.r(name), Version: st.Version},
				&zk.CreateRequest{Path: d.dead(id), Data: deadRecord(j, reasonLastAttempt, time.Now()), Acl: d.b.acl})
			ops = append(ops, kops...)
			continue
		}
		j.attempts++
		h := d.b.newID()
		ops = append(ops, &zk.SetDataRequest{Path: d.r(name), Data: j.encode(), Version: st.Version},
			&zk.CreateRequest{Path: d.c(id), Data: []byte(h), Acl: d.b.acl, Flags: zk.FlagEphemeral})
		jobs, names, holders = append(jobs, j), append(names, name), append(holders, h)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	res, err := d.claimMulti(ctx, ops, jobs, holders)
	if err != nil || len(jobs) == 0 {
		if conflict(err) {
			err = nil
		}
		return nil, err
	}
	out := make([]driver.Claim, 0, len(jobs))
	var lost []*qclaim
	d.mu.Lock()
	k := 0
	for _, r := range res {
		if r.Stat == nil || k == len(jobs) {
			continue
		}
		// A SetData answer: the claim's record version and zxid.
		j := jobs[k]
		loss := driver.NewLoss()
		e.track(loss)
		c := &qclaim{e: e, job: j, rname: names[k], rver: r.Stat.Version, loss: loss, holder: holders[k]}
		if d.closed {
			lost = append(lost, c)
		} else {
			d.claims[c] = struct{}{}
		}
		out = append(out, driver.Claim{ID: j.id, Payload: j.payload, Attempt: j.attempts, MaxAttempts: j.max,
			Token: uint64(r.Stat.Mzxid)<<zkTokenBits | uint64(k), Loss: loss, Data: c})
		k++
	}
	d.mu.Unlock()
	for _, c := range lost { // the handle closed meanwhile: give them back
		d.giveBack(c)
	}
	return out, nil
}

// claimMulti sends the claim's multi-op. It is never abandoned half-way:
// when ctx ends first the caller returns, and claim nodes made are
// deleted once the answer comes (or, if it never does, looked for by
// their data).
func (d *queueDriver) claimMulti(ctx context.Context, ops []any, jobs []qjob, holders []string) ([]zk.MultiResponse, error) {
	type result struct {
		res []zk.MultiResponse
		err error
	}
	ch := make(chan result)
	gone := make(chan struct{})
	d.b.bg.Add(1)
	go func() {
		defer d.b.bg.Done()
		res, err := d.b.c.Multi(ops...)
		select {
		case ch <- result{res, err}:
		case <-gone:
			if err == nil || !conflict(err) {
				for k, j := range jobs {
					d.dropClaim(d.c(j.id), holders[k])
				}
			}
		}
	}()
	t := time.NewTimer(d.b.o.RequestTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil && !conflict(r.err) {
			for k, j := range jobs {
				d.dropClaim(d.c(j.id), holders[k])
			}
		}
		return r.res, r.err
	case <-ctx.Done():
		close(gone)
		return nil, ctx.Err()
	case <-t.C:
		close(gone)
		return nil, fmt.Errorf("claim: %w", zk.ErrConnectionClosed)
	}
}

// Stats counts records ready by now, those later, claims and dead letters.
func (d *queueDriver) Stats(ctx context.Context) (driver.QueueStats, error) {
	var s driver.QueueStats
	rs, err := d.children(ctx, d.dir+"/r")
	if errors.Is(err, zk.ErrNoNode) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	// A queue's nodes are made one after another (ensure): one not made
	// yet is empty.
	cs, err := d.children(ctx, d.dir+"/c")
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return s, err
	}
	ds, err := d.children(ctx, d.dir+"/d")
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return s, err
	}
	now := time.Now().UnixNano()
	for _, name := range rs {
		if at, _, ok := parseR(name); ok && at > now {
			s.Delayed++
		} else if ok {
			s.Ready++
		}
	}
	s.InFlight, s.Dead = len(cs), len(ds)
	s.Ready = max(0, s.Ready-s.InFlight)
	return s, nil
}

// Dead lists dead letters, lowest id first.
func (d *queueDriver) Dead(ctx context.Context, limit int) ([]driver.DeadJob, error) {
	names, err := d.children(ctx, d.dir+"/d")
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []driver.DeadJob
	for _, name := range names {
		if len(out) == limit {
			break
		}
		id, _ := strconv.ParseUint(name, 16, 64)
		v, _, err := d.get(ctx, d.dead(id))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, dj, err := decodeDead(id, v); err == nil {
			out = append(out, dj)
		}
	}
	return out, nil
}

// Requeue makes each dead letter ready now, attempts from zero, taking its
// uniqueness key back if no pending job has it.
func (d *queueDriver) Requeue(ctx context.Context, ids []uint64) (int, error) {
	n := 0
	for _, id := range ids {
		v, st, err := d.get(ctx, d.dead(id))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return n, err
		}
		j, _, err := decodeDead(id, v)
		if err != nil {
			continue
		}
		j.attempts, j.at = 0, time.Now().UnixNano()
		ops := []any{&zk.DeleteRequest{Path: d.dead(id), Version: st.Version},
			&zk.CreateRequest{Path: d.r(rname(j.at, id)), Data: j.encode(), Acl: d.b.acl}}
		if j.key != "" {
			ops = append(ops, &zk.CreateRequest{Path: d.k(j.key), Data: []byte(strconv.FormatUint(id, 10)), Acl: d.b.acl})
		}
		_, err = d.multi(ctx, ops...)
		switch {
		case err == nil:
			n++
		case !conflict(err):
			return n, err
		}
	}
	return n, nil
}

// Purge deletes dead letters.
func (d *queueDriver) Purge(ctx context.Context, ids []uint64) (int, error) {
	n := 0
	for _, id := range ids {
		_, err := req(d.b, ctx, func() (struct{}, error) { return struct{}{}, d.b.c.Delete(d.dead(id), -1) })
		switch {
		case err == nil:
			n++
		case !errors.Is(err, zk.ErrNoNode):
			return n, err
		}
	}
	return n, nil
}
