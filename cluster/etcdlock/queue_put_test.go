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
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(count)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	b, err := New(cl, lease.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, &n
}

// testQueuePutRoundTrips: a Put after one of the same handle is one
// request; a Put that finds another handle's Put between, or a held key,
// is two (the failed transaction reads what it compared), and each gives
// the right ids.
func testQueuePutRoundTrips(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, n := countingBackend(t, c, "qput/")
	other, _ := fast(t, c, "qput/")
	q := must(b.Queue(ctx, "jobs")).get(t)
	q2 := must(other.Queue(ctx, "jobs")).get(t)
	put := func(q baton.Queue, opts ...baton.PutOption) (uint64, int64) {
		t.Helper()
		before := n.Load()
		id, err := q.Put(ctx, []byte("x"), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(id), n.Load() - before
	}
	put(q)
	if id, reqs := put(q); id != 2 || reqs != 1 {
		t.Errorf("a Put after one of the handle's own: id %d in %d requests, want 2 in 1", id, reqs)
	}
	put(q2)
	if id, reqs := put(q); id != 4 || reqs != 2 {
		t.Errorf("a Put after another handle's: id %d in %d requests, want 4 in 2", id, reqs)
	}
	k := baton.UniqueKey("k")
	first, _ := put(q2, k)
	if id, reqs := put(q, k); id != first || reqs != 2 {
		t.Errorf("a Put of a held key: id %d in %d requests, want %d in 2", id, reqs, first)
	}
	if id, reqs := put(q); id != first+1 || reqs > 2 {
		t.Errorf("the next Put: id %d in %d requests, want %d in at most 2", id, reqs, first+1)
	}
	if st, err := q.Stats(ctx); err != nil || st.Ready != 6 {
		t.Errorf("Stats = %+v, %v; want 6 ready", st, err)
	}
}
