package etcdlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// countingBackend opens a backend whose client counts its KV requests.
func countingBackend(t *testing.T, c *cluster, prefix string) (baton.Backend, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" || method == "/etcdserverpb.KV/Range" {
			n.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	return interceptedBackend(t, c, prefix, count), &n
}

// interceptedBackend opens a backend whose client's calls go through ic.
func interceptedBackend(t *testing.T, c *cluster, prefix string, ic grpc.UnaryClientInterceptor) baton.Backend {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(ic)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	b, err := New(cl, lease.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// testQueuePutRoundTrips: a Put is one request, after a Put of another
// handle too (no shared sequence to read again), except the first of a
// queue, which finds no format mark and writes it, and one that finds a key held
// (the failed transaction reads what it compared); ids grow in the order
// of the Puts and a batch's in its order.
func testQueuePutRoundTrips(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, n := countingBackend(t, c, "qput/")
	other, _ := fast(t, c, "qput/")
	q := must(b.Queue(ctx, "jobs")).get(t)
	q2 := must(other.Queue(ctx, "jobs")).get(t)
	var last baton.JobID
	put := func(q baton.Queue, opts ...baton.PutOption) (baton.JobID, int64) {
		t.Helper()
		before := n.Load()
		id, err := q.Put(ctx, []byte("x"), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return id, n.Load() - before
	}
	next := func(what string, id baton.JobID, reqs, want int64) {
		t.Helper()
		if id <= last || reqs != want {
			t.Errorf("%s: id %d (after %d) in %d requests, want %d", what, id, last, reqs, want)
		}
		last = id
	}
	id, reqs := put(q)
	next("the queue's first Put", id, reqs, 3)
	id, reqs = put(q)
	next("a Put after one of the handle's own", id, reqs, 1)
	id, _ = put(q2)
	next("another handle's Put", id, 1, 1)
	id, reqs = put(q)
	next("a Put after another handle's", id, reqs, 1)
	ids := must(q.PutBatch(ctx, []baton.JobSpec{{Payload: []byte("1")}, {Payload: []byte("2")}, {Payload: []byte("3")}})).get(t)
	for _, id := range ids {
		next("a job of a batch", id, 1, 1)
	}
	k := baton.UniqueKey("k")
	first, _ := put(q2, k)
	next("a Put of a key", first, 1, 1)
	if id, reqs := put(q, k); id != first || reqs != 2 {
		t.Errorf("a Put of a held key: id %d in %d requests, want %d in 2", id, reqs, first)
	}
	if id, reqs := put(q, k); id != first || reqs != 2 {
		t.Errorf("a Put of a key held by a job of the handle's own: id %d in %d requests, want %d in 2", id, reqs, first)
	}
	id, reqs = put(q)
	next("the next Put", id, reqs, 1)
	if st, err := q.Stats(ctx); err != nil || st.Ready != 9 {
		t.Errorf("Stats = %+v, %v; want 9 ready", st, err)
	}
}
