package etcdlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// TestQueueGatheredClaims: claims of handles of one Backend that come
// while a claim's requests run wait for the next claim, which takes the
// oldest jobs for all of them in one transaction, the oldest to the first
// to come; a caller whose context ended while it waited gets nothing, and
// the job it would have had is ready again at once.
func TestQueueGatheredClaims(t *testing.T) {
	const n = 8
	c := startCluster(t, 1)
	// The client's transactions wait while stalled: the first claim's
	// read then holds its batch open while the others come.
	var stalled atomic.Bool
	entered, gate := make(chan struct{}, 1), make(chan struct{})
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{c.members[0].url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == "/etcdserverpb.KV/Txn" && stalled.Load() {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-gate
			}
			return invoke(ctx, method, req, reply, cc, opts...)
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	o, err := buildOptions([]lease.Option{lease.WithTTL(2 * time.Second), lease.WithRenewEvery(200 * time.Millisecond), lease.WithPrefix("qgather/")})
	if err != nil {
		t.Fatal(err)
	}
	d := newBackend(cl, false, o)
	b := baton.NewBackend(d)
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	qs := make([]baton.Queue, n)
	for i := range qs {
		if qs[i], err = b.Queue(ctx, "jobs"); err != nil {
			t.Fatal(err)
		}
		defer qs[i].Close()
	}
	specs := make([]baton.JobSpec, n)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: []byte{byte(i)}}
	}
	ids, err := qs[0].PutBatch(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	calls := d.queues.Hold(d.dir(baton.KindQueue, "jobs"))
	defer d.queues.Drop(d.dir(baton.KindQueue, "jobs"))

	stalled.Store(true)
	jobs, errs := make([]*baton.Job, n), make([]error, n)
	lastCtx, cancelLast := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, q := range qs {
		cctx := ctx
		if i == n-1 {
			cctx = lastCtx
		}
		wg.Go(func() { jobs[i], errs[i] = q.Claim(cctx) })
		if i == 0 {
			<-entered
			continue
		}
		for calls.claims.Waiting() < i { // they come one after another
			time.Sleep(time.Millisecond)
		}
	}
	cancelLast()
	stalled.Store(false)
	close(gate)
	wg.Wait()

	if !errors.Is(errs[n-1], context.Canceled) || jobs[n-1] != nil {
		t.Fatalf("a claim whose context ended while it waited: %v, %v", jobs[n-1], errs[n-1])
	}
	for i, j := range jobs[:n-1] {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if j.ID() != ids[i] {
			t.Errorf("claim %d (in order of arrival) got job %d, want %d", i, j.ID(), ids[i])
		}
		if i > 0 && j.Token() <= jobs[i-1].Token() {
			t.Errorf("claim %d's token %d is not above the one before (%d)", i, j.Token(), jobs[i-1].Token())
		}
		if i > 1 && j.Token()>>tokenBits != jobs[1].Token()>>tokenBits {
			t.Errorf("claim %d made by another transaction than claim 1 (tokens %d, %d): not gathered", i, j.Token(), jobs[1].Token())
		}
	}
	if jobs[1].Token()>>tokenBits == jobs[0].Token()>>tokenBits {
		t.Errorf("the stalled claim and those that came after it share a transaction")
	}
	if s, err := qs[0].Stats(ctx); err != nil || s.InFlight != n-1 || s.Ready != 1 {
		t.Fatalf("Stats = %+v, %v; want the cancelled claim's job ready again", s, err)
	}
	again, err := qs[0].TryClaim(ctx)
	if err != nil || again.ID() != ids[n-1] {
		t.Fatalf("TryClaim after the cancelled claim: %v, %v; want job %d", again, err, ids[n-1])
	}
	for _, j := range append(jobs[:n-1], again) {
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := qs[0].Stats(ctx); err != nil || s != (baton.QueueStats{}) {
		t.Fatalf("Stats = %+v, %v; want an empty queue", s, err)
	}
}
