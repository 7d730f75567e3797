package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// Put adds the jobs in one transaction, which compares the id sequence
// and every uniqueness key it counts on. The handle remembers the sequence
// its last Put wrote, so that a Put after one of its own is one round
// trip: it takes the sequence as still its own and its keys as free. When
// another Put came between, or a key is held, the transaction fails and its
// other branch reads what it compared, for the next try.
func (d *queueDriver) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	size := 0
	for _, j := range jobs {
		size += len(j.Payload) + 3*len(j.Key) + jobOverhead
	}
	if size > maxQueueRequest {
		return nil, fmt.Errorf("%w: %d jobs take about %d bytes, over the %d bytes one etcd request carries", baton.ErrInvalidArgument, len(jobs), size, maxQueueRequest)
	}
	keys := putKeys(jobs)
	st := d.lastPut()
	for attempt := 0; ; attempt++ {
		if st == nil {
			var err error
			if st, err = d.readPut(ctx, keys); err != nil {
				if ctx.Err() != nil || !transient(err) {
					return nil, lease.CtxErr(ctx, err)
				}
				if err := sleepCtx(ctx, min(time.Duration(attempt+1)*25*time.Millisecond, 500*time.Millisecond)); err != nil {
					return nil, err
				}
				continue
			}
		}
		ids, next, err := d.tryPut(ctx, jobs, keys, st)
		st = next
		switch {
		case err == nil && ids != nil:
			return ids, nil
		case errors.Is(err, rpctypes.ErrTooManyOps):
			return nil, fmt.Errorf("%w: a batch of %d jobs is more operations than the server's --max-txn-ops allows: %w", baton.ErrInvalidArgument, len(jobs), err)
		case err != nil && (ctx.Err() != nil || !transient(err)):
			return nil, lease.CtxErr(ctx, err)
		case err != nil:
			if err := sleepCtx(ctx, min(time.Duration(attempt+1)*25*time.Millisecond, 500*time.Millisecond)); err != nil {
				return nil, err
			}
		}
	}
}

// putState is what a Put compares: the id sequence and the revision that
// wrote it (0: none yet), and the ids and revisions of the uniqueness keys
// that are held (a key not in held is taken as free).
type putState struct {
	seq    uint64
	seqRev int64
	held   map[string]uint64
	keyRev map[string]int64
}

// putKeys returns the distinct uniqueness keys of jobs.
func putKeys(jobs []driver.PutJob) []string {
	var keys []string
	seen := map[string]bool{}
	for _, j := range jobs {
		if j.Key != "" && !seen[j.Key] {
			seen[j.Key] = true
			keys = append(keys, j.Key)
		}
	}
	return keys
}

// lastPut returns the state this handle's last Put left, or nil.
func (d *queueDriver) lastPut() *putState {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lastRev == 0 {
		return nil
	}
	return &putState{seq: d.lastSeq, seqRev: d.lastRev}
}

// putReads reads the sequence and the keys.
func (d *queueDriver) putReads(keys []string) []clientv3.Op {
	reads := []clientv3.Op{clientv3.OpGet(d.dir + "n")}
	for _, k := range keys {
		reads = append(reads, clientv3.OpGet(d.kkey(k)))
	}
	return reads
}

// putStateOf parses the responses of putReads.
func putStateOf(keys []string, rs []*etcdserverpb.ResponseOp) *putState {
	st := &putState{held: map[string]uint64{}, keyRev: map[string]int64{}}
	if kvs := rs[0].GetResponseRange().Kvs; len(kvs) > 0 {
		st.seq, _ = strconv.ParseUint(string(kvs[0].Value), 10, 64)
		st.seqRev = kvs[0].ModRevision
	}
	for i, k := range keys {
		if kvs := rs[i+1].GetResponseRange().Kvs; len(kvs) > 0 {
			st.held[k], _ = strconv.ParseUint(string(kvs[0].Value), 10, 64)
			st.keyRev[k] = kvs[0].ModRevision
		}
	}
	return st
}

// readPut reads what a Put compares.
func (d *queueDriver) readPut(ctx context.Context, keys []string) (*putState, error) {
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	resp, err := d.b.c.Txn(rctx).Then(d.putReads(keys)...).Commit()
	if err != nil {
		return nil, err
	}
	return putStateOf(keys, resp.Responses), nil
}

// tryPut writes the jobs if st is still the state. It returns the ids, or
// nil ids and the state it read instead (nil after an error).
func (d *queueDriver) tryPut(ctx context.Context, jobs []driver.PutJob, keys []string, st *putState) ([]uint64, *putState, error) {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(d.dir+"n"), "=", st.seqRev)}
	held := maps.Clone(st.held)
	if held == nil {
		held = map[string]uint64{}
	}
	for _, k := range keys {
		kk := d.kkey(k)
		if rev, ok := st.keyRev[k]; ok {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(kk), "=", rev))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(kk), "=", 0))
		}
	}
	now := time.Now().UnixNano()
	seq := st.seq
	ids := make([]uint64, len(jobs))
	var writes []clientv3.Op
	for i, j := range jobs {
		if id, ok := held[j.Key]; ok && j.Key != "" {
			ids[i] = id
			continue
		}
		seq++
		ids[i] = seq
		// A job ready in the past becomes ready now, behind those
		// already waiting.
		at := now
		if !j.At.IsZero() {
			at = max(at, j.At.UnixNano())
		}
		if j.Key != "" {
			held[j.Key] = seq
			writes = append(writes, clientv3.OpPut(d.kkey(j.Key), strconv.FormatUint(seq, 10)))
		}
		rec := qjob{id: seq, at: at, max: j.MaxAttempts, key: j.Key, payload: j.Payload}
		writes = append(writes, clientv3.OpPut(d.rkey(at, seq), string(rec.encode())))
	}
	writes = append(writes, clientv3.OpPut(d.dir+"n", strconv.FormatUint(seq, 10)))
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	wr, err := d.b.c.Txn(rctx).If(cmps...).Then(writes...).Else(d.putReads(keys)...).Commit()
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil:
		d.lastRev = 0
		return nil, nil, err
	case !wr.Succeeded:
		d.lastRev = 0
		return nil, putStateOf(keys, wr.Responses), nil
	}
	// Every write of a transaction has its revision.
	d.lastSeq, d.lastRev = seq, wr.Header.Revision
	return ids, nil, nil
}
