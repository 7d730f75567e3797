package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// Put adds the jobs in one transaction, which names each record by the
// Put's nonce and the job's place, and gives it the id its revision makes
// (see putID): ids grow in the order of the Puts, a batch's in its order,
// and Puts of many producers share no key they all write. The
// transaction compares the format mark and every uniqueness key it counts
// on, taking the keys as free at first; when the mark is missing or a key
// is held, its other branch reads them for the next try, which returns
// the held keys' ids or, first, writes the mark (see mark).
func (d *queueDriver) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	size := 0
	for _, j := range jobs {
		size += len(j.Payload) + 3*len(j.Key) + jobOverhead
	}
	if size > maxQueueRequest {
		return nil, fmt.Errorf("%w: %d jobs take about %d bytes, over the %d bytes one etcd request carries", baton.ErrInvalidArgument, len(jobs), size, maxQueueRequest)
	}
	keys := putKeys(jobs)
	st := &putState{marked: true}
	for attempt := 0; ; attempt++ {
		ids, next, err := d.tryPut(ctx, jobs, keys, st)
		switch {
		case err == nil && ids != nil:
			return ids, nil
		case err == nil && next != nil:
			st = next
			continue
		case err == nil:
			st = &putState{marked: true}
			continue
		case errors.Is(err, rpctypes.ErrTooManyOps):
			return nil, fmt.Errorf("%w: a batch of %d jobs is more operations than the server's --max-txn-ops allows: %w", baton.ErrInvalidArgument, len(jobs), err)
		case ctx.Err() != nil || !transient(err):
			return nil, lease.CtxErr(ctx, err)
		}
		if err := sleepCtx(ctx, min(time.Duration(attempt+1)*25*time.Millisecond, 500*time.Millisecond)); err != nil {
			return nil, err
		}
	}
}

// putState is what a Put compares: whether the format mark is written
// (if not, the earlier sequence and the revision that wrote it, 0 for
// none), and the ids and revisions of the uniqueness keys that are held
// (a key not in held is taken as free).
type putState struct {
	marked bool
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

// putReads reads the mark, the earlier sequence and the keys.
func (d *queueDriver) putReads(keys []string) []clientv3.Op {
	reads := []clientv3.Op{clientv3.OpGet(d.dir+"v", clientv3.WithCountOnly()), clientv3.OpGet(d.dir + "n")}
	for _, k := range keys {
		reads = append(reads, clientv3.OpGet(d.kkey(k)))
	}
	return reads
}

// putStateOf parses the responses of putReads.
func putStateOf(keys []string, rs []*etcdserverpb.ResponseOp) *putState {
	st := &putState{marked: rs[0].GetResponseRange().Count > 0, held: map[string]uint64{}, keyRev: map[string]int64{}}
	if kvs := rs[1].GetResponseRange().Kvs; len(kvs) > 0 {
		st.seq, _ = strconv.ParseUint(string(kvs[0].Value), 10, 64)
		st.seqRev = kvs[0].ModRevision
	}
	for i, k := range keys {
		if kvs := rs[i+2].GetResponseRange().Kvs; len(kvs) > 0 {
			st.held[k] = keyID(kvs[0])
			st.keyRev[k] = kvs[0].ModRevision
		}
	}
	return st
}

// mark writes the format mark, and moves the earlier format's sequence up
// to seqFloor, so that the ids it gives from now on are above those of
// j/ records (see the key layout), if the sequence is still as st read
// it. Either way the Put tries again, taking the mark as written.
func (d *queueDriver) mark(ctx context.Context, st *putState) error {
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	_, err := d.b.c.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(d.dir+"n"), "=", st.seqRev),
		clientv3.Compare(clientv3.CreateRevision(d.dir+"v"), "=", 0)).
		Then(clientv3.OpPut(d.dir+"n", strconv.FormatUint(max(st.seq, seqFloor), 10)), clientv3.OpPut(d.dir+"v", "2")).
		Commit()
	return err
}

// tryPut writes the jobs if st is still the state, the format mark being
// written. It returns the ids, or nil ids and the state it read instead,
// or nil ids and state after an error or the mark's write.
func (d *queueDriver) tryPut(ctx context.Context, jobs []driver.PutJob, keys []string, st *putState) ([]uint64, *putState, error) {
	if !st.marked {
		return nil, nil, d.mark(ctx, st)
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(d.dir+"v"), ">", 0)}
	var writes []clientv3.Op
	for _, k := range keys {
		kk := d.kkey(k)
		if rev, ok := st.keyRev[k]; ok {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(kk), "=", rev))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(kk), "=", 0))
		}
	}
	held := maps.Clone(st.held)
	if held == nil {
		held = map[string]uint64{}
	}
	// first[k] is the place of the job of this Put that takes key k.
	first := map[string]int{}
	now := time.Now().UnixNano()
	// The records of two Puts could clash only with the same ready time,
	// to the nanosecond, and the same 64 random bits.
	nonce := rand.Uint64()
	for i, j := range jobs {
		if j.Key != "" {
			if _, ok := held[j.Key]; ok {
				continue
			}
			if _, ok := first[j.Key]; ok {
				continue
			}
			first[j.Key] = i
			writes = append(writes, clientv3.OpPut(d.kkey(j.Key), "@"+strconv.Itoa(i)))
		}
		// A job ready in the past becomes ready now, behind those
		// already waiting.
		at := now
		if !j.At.IsZero() {
			at = max(at, j.At.UnixNano())
		}
		rec := qjob{at: at, max: j.MaxAttempts, key: j.Key, payload: j.Payload}
		writes = append(writes, clientv3.OpPut(d.jkey(at, nonce, i), string(rec.encode())))
	}
	rctx, cancel := d.b.rctx(ctx)
	defer cancel()
	wr, err := d.b.c.Txn(rctx).If(cmps...).Then(writes...).Else(d.putReads(keys)...).Commit()
	switch {
	case err != nil:
		return nil, nil, err
	case !wr.Succeeded:
		return nil, putStateOf(keys, wr.Responses), nil
	}
	// Every write of a transaction has its revision.
	rev := wr.Header.Revision
	ids := make([]uint64, len(jobs))
	for i, j := range jobs {
		switch id, ok := held[j.Key]; {
		case ok && j.Key != "":
			ids[i] = id
		case j.Key != "":
			ids[i] = putID(rev, uint64(first[j.Key]))
		default:
			ids[i] = putID(rev, uint64(i))
		}
	}
	return ids, nil, nil
}
