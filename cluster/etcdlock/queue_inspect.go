package etcdlock

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/listing"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/queuedetail"
)

// Inspection of queues: a queue is listed once a Put has written Q n
// (the first Put of a queue writes it with the format mark, see the key
// layout), which stays when its jobs are done. Inspect shows its
// claims as holders and its counts in Detail; Remove deletes every key of
// the queue, so its claimants' claims are lost (their watches see the
// claim keys go).

// queueNames lists the queues among the keys under the prefix.
func (b *backend) queueNames(kvs [][]byte) []listing.Ref {
	var refs []listing.Ref
	base := b.o.prefix + string(baton.KindQueue) + "/"
	for _, k := range kvs {
		s, ok := strings.CutPrefix(string(k), base)
		if !ok {
			continue
		}
		if enc, ok := strings.CutSuffix(s, "/n"); ok && enc != "" && !strings.Contains(enc, "/") {
			refs = append(refs, listing.Ref{Kind: baton.KindQueue, Name: decodeName(enc)})
		}
	}
	return refs
}

// inspectQueue reads the queue in one transaction (at one revision): the
// counts of both record forms; the claims. When jobs are ready, the first
// ready keys of both forms, as many as there are claims and one more,
// find the oldest job ready and not claimed.
func (b *backend) inspectQueue(ctx context.Context, name string) (baton.Info, error) {
	d := &queueDriver{b: b, dir: b.dir(baton.KindQueue, name)}
	rctx, cancel := b.rctx(ctx)
	defer cancel()
	now := time.Now()
	reads := []clientv3.Op{
		clientv3.OpGet(d.dir+"n", clientv3.WithCountOnly()),
		clientv3.OpGet(d.dir+"c/", clientv3.WithPrefix()),
		clientv3.OpGet(d.dir+"d/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
	}
	for _, f := range []string{"r/", "j/"} {
		from, upto := d.dir+f, fmt.Sprintf("%s%s%016x", d.dir, f, now.UnixNano()+1)
		reads = append(reads, clientv3.OpGet(from, clientv3.WithRange(upto), clientv3.WithCountOnly()),
			clientv3.OpGet(upto, clientv3.WithRange(clientv3.GetPrefixRangeEnd(from)), clientv3.WithCountOnly()))
	}
	resp, err := b.c.Txn(rctx).Then(reads...).Commit()
	if err != nil {
		return baton.Info{}, lease.CtxErr(ctx, err)
	}
	rr := func(i int) *clientv3.GetResponse {
		return (*clientv3.GetResponse)(resp.Responses[i].GetResponseRange())
	}
	if rr(0).Count == 0 {
		return baton.Info{}, fmt.Errorf("etcdlock: queue %q: %w", name, fs.ErrNotExist)
	}
	claims := rr(1).Kvs
	claimed := make(map[uint64]bool, len(claims))
	in := baton.Info{Name: name, Kind: baton.KindQueue, Backend: b.Kind(), Impl: "lease", Holders: []baton.Holder{}, Waiters: -1}
	ttls := map[int64]time.Duration{}
	for _, kv := range claims {
		id := parseID(kv.Key)
		claimed[id] = true
		h := parseHolder(kv.Value)
		if _, ok := ttls[kv.Lease]; !ok {
			ttls[kv.Lease] = 0
			if r, err := b.c.TimeToLive(rctx, clientv3.LeaseID(kv.Lease)); err == nil && r.TTL > 0 {
				ttls[kv.Lease] = time.Duration(r.TTL) * time.Second
			}
		}
		in.Holders = append(in.Holders, baton.Holder{PID: h.PID, Host: h.Host, Since: h.Since, Mode: "exclusive",
			Owner: fmt.Sprint("job ", id), TTL: ttls[kv.Lease]})
	}
	ready := max(0, int(rr(3).Count+rr(5).Count)-len(claims))
	var oldest time.Duration
	if ready > 0 {
		// Keys sort oldest ready first: among the first len(claims)+1
		// of both forms, one is not claimed. Read at the revision of
		// the counts; j/ ids need the records' create revisions.
		var firsts [2]*etcdserverpb.RangeResponse
		for i, f := range []string{"r/", "j/"} {
			from, upto := d.dir+f, fmt.Sprintf("%s%s%016x", d.dir, f, now.UnixNano()+1)
			r, err := b.c.Get(rctx, from, clientv3.WithRange(upto), clientv3.WithKeysOnly(),
				clientv3.WithLimit(int64(len(claims)+1)), clientv3.WithRev(resp.Header.Revision))
			if err != nil {
				return baton.Info{}, lease.CtxErr(ctx, err)
			}
			firsts[i] = (*etcdserverpb.RangeResponse)(r)
		}
		rs, _ := d.oldest(firsts[0], firsts[1], len(claims)+1)
		for _, r := range rs {
			if !claimed[r.id] {
				oldest = now.Sub(time.Unix(0, r.at))
				break
			}
		}
	}
	in.Detail = queuedetail.Format(queuedetail.Counts{Ready: ready, Delayed: int(rr(4).Count + rr(6).Count), InFlight: len(claims), Dead: int(rr(2).Count), Oldest: oldest})
	return in, nil
}
