package etcdlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// v1Queue is the earlier format's queue (one id sequence Q n, records
// under r/ only), as its processes Put and claim, kept to test a mixed
// deployment: its Put and its claim's reads, parsing and claim keys are
// the earlier code's. Left out: the marks of claimants of one process
// (they only order one process's claimants) and waiting. Ack and Retry are
// the driver's, which the format change left as they were.
type v1Queue struct {
	d       *queueDriver
	lastSeq uint64
	lastRev int64
}

func newV1Queue(b *backend, name string) *v1Queue {
	// Its own calls: the earlier version is another process.
	return &v1Queue{d: &queueDriver{b: b, dir: b.dir(baton.KindQueue, name), calls: &queueCalls{}, claims: map[*qclaim]struct{}{}}}
}

type v1PutState struct {
	seq    uint64
	seqRev int64
	held   map[string]uint64
	keyRev map[string]int64
}

func (q *v1Queue) putReads(keys []string) []clientv3.Op {
	reads := []clientv3.Op{clientv3.OpGet(q.d.dir + "n")}
	for _, k := range keys {
		reads = append(reads, clientv3.OpGet(q.d.kkey(k)))
	}
	return reads
}

func v1PutStateOf(keys []string, rs []*etcdserverpb.ResponseOp) *v1PutState {
	st := &v1PutState{held: map[string]uint64{}, keyRev: map[string]int64{}}
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

// Put is the earlier Put: it compares and writes the id sequence.
func (q *v1Queue) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	keys := putKeys(jobs)
	var st *v1PutState
	if q.lastRev != 0 {
		st = &v1PutState{seq: q.lastSeq, seqRev: q.lastRev}
	}
	for {
		if st == nil {
			resp, err := q.d.b.c.Txn(ctx).Then(q.putReads(keys)...).Commit()
			if err != nil {
				return nil, err
			}
			st = v1PutStateOf(keys, resp.Responses)
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(q.d.dir+"n"), "=", st.seqRev)}
		held := map[string]uint64{}
		for k, v := range st.held {
			held[k] = v
		}
		for _, k := range keys {
			kk := q.d.kkey(k)
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
			at := now
			if !j.At.IsZero() {
				at = max(at, j.At.UnixNano())
			}
			if j.Key != "" {
				held[j.Key] = seq
				writes = append(writes, clientv3.OpPut(q.d.kkey(j.Key), strconv.FormatUint(seq, 10)))
			}
			rec := qjob{id: seq, at: at, max: j.MaxAttempts, key: j.Key, payload: j.Payload}
			writes = append(writes, clientv3.OpPut(q.d.rkey(at, seq), string(rec.encode())))
		}
		writes = append(writes, clientv3.OpPut(q.d.dir+"n", strconv.FormatUint(seq, 10)))
		wr, err := q.d.b.c.Txn(ctx).If(cmps...).Then(writes...).Else(q.putReads(keys)...).Commit()
		if err != nil {
			return nil, err
		}
		if !wr.Succeeded {
			q.lastRev = 0
			st = v1PutStateOf(keys, wr.Responses)
			continue
		}
		q.lastSeq, q.lastRev = seq, wr.Header.Revision
		return ids, nil
	}
}

// parseReady is the earlier reading of a record's key.
func (q *v1Queue) parseReady(key []byte) (int64, uint64) {
	k := strings.TrimPrefix(string(key), q.d.dir+"r/")
	at, _ := strconv.ParseUint(k[:min(16, len(k))], 16, 64)
	return int64(at), parseID(key)
}

// TryClaim is the earlier claim of up to n ready jobs without waiting:
// its reads of the claims and of r/, and its claim keys.
func (q *v1Queue) TryClaim(ctx context.Context, n int) ([]driver.Claim, error) {
	d := q.d
	s, err := d.b.session(ctx)
	if err != nil {
		return nil, err
	}
	limit := n
	for {
		now := time.Now().UnixNano()
		from := d.dir + "r/"
		upto := fmt.Sprintf("%sr/%016x", d.dir, now+1)
		resp, err := d.b.c.Txn(ctx).Then(
			clientv3.OpGet(d.dir+"c/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			clientv3.OpGet(from, clientv3.WithRange(upto), clientv3.WithLimit(int64(limit))),
		).Commit()
		if err != nil {
			return nil, err
		}
		claimed := map[uint64]bool{}
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			claimed[parseID(kv.Key)] = true
		}
		ready := resp.Responses[1].GetResponseRange()
		var picks []*mvccpb.KeyValue
		for _, kv := range ready.Kvs {
			if !claimed[parseID(kv.Key)] && len(picks) < n {
				picks = append(picks, kv)
			}
		}
		if len(picks) == 0 && ready.More && limit < n+len(claimed) {
			limit = n + len(claimed)
			continue
		}
		if len(picks) == 0 {
			return nil, baton.ErrEmpty
		}
		cs, err := q.claim(ctx, s, picks)
		if err != nil || len(cs) > 0 {
			return cs, err
		}
	}
}

func (q *v1Queue) claim(ctx context.Context, s *session, picks []*mvccpb.KeyValue) ([]driver.Claim, error) {
	d := q.d
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	var ckeys, gkeys []string
	var jobs []qjob
	for _, kv := range picks {
		at, id := q.parseReady(kv.Key)
		j, err := decodeJob(id, at, kv.Value)
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
		j.attempts++
		holder := d.b.claimValue(s.newID())
		ops = append(ops, clientv3.OpPut(ck, holder, clientv3.WithLease(s.id)), clientv3.OpPut(string(kv.Key), string(j.encode())))
		ckeys, gkeys = append(ckeys, ck), append(gkeys, guardKey(ck, holder))
		jobs = append(jobs, j)
	}
	resp, err := d.b.commit(ctx, s, gkeys, func(rctx context.Context) (*clientv3.TxnResponse, error) {
		return d.b.c.Txn(rctx).If(cmps...).Then(ops...).Commit()
	})
	if err != nil || !resp.Succeeded {
		return nil, err
	}
	rev := resp.Header.Revision
	var out []driver.Claim
	for k, j := range jobs {
		loss := driver.NewLoss()
		s.track(loss, ckeys[k], rev)
		c := &qclaim{s: s, job: j, ckey: ckeys[k], gkey: gkeys[k], rkey: d.rkey(j.at, j.id), rev: rev, loss: loss, hw: d.b.watchHold(s, ckeys[k], rev, loss)}
		d.mu.Lock()
		d.claims[c] = struct{}{}
		d.mu.Unlock()
		out = append(out, driver.Claim{ID: j.id, Payload: j.payload, Attempt: j.attempts, MaxAttempts: j.max,
			Token: uint64(rev)<<tokenBits | uint64(k), Loss: loss, Data: c})
	}
	return out, nil
}
