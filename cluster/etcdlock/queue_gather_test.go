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
	"github.com/batonlock/baton/driver"
)

// testQueueGatheredClaims: claims of handles of one Backend that come
// while a claim's requests run wait for the next claim, which takes the
// oldest jobs for all of them in one transaction, the oldest to the first
// to come. A caller whose context ended while it waited takes no part (no
// job is claimed for it); one whose context ends while the shared claim
// runs gets nothing either, and the job claimed for it is ready again at
// once (its attempt counted, as for any claim given back).
func testQueueGatheredClaims(t *testing.T, c *cluster) {
	const n = 8
	sc := newStalling(t, c, "qgather/")
	d, b := sc.d, sc.b
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	qs := make([]baton.Queue, n)
	var err error
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

	// Claim 0's read waits; claims 1..7 come one after another behind it.
	sc.stallNext(1)
	jobs, errs := make([]*baton.Job, n), make([]error, n)
	ctxs, cancels := make([]context.Context, n), make([]context.CancelFunc, n)
	var wg sync.WaitGroup
	for i, q := range qs {
		ctxs[i], cancels[i] = context.WithCancel(ctx)
		defer cancels[i]()
		wg.Go(func() { jobs[i], errs[i] = q.Claim(ctxs[i]) })
		if i == 0 {
			<-sc.entered
			continue
		}
		for calls.claims.Waiting() < i {
			time.Sleep(time.Millisecond)
		}
	}
	const left, leaving = n - 2, n - 1 // leaves while waiting; while claimed for
	cancels[left]()
	// Claim 0 runs its claim's transaction; the batch's read then waits.
	sc.stallThen(2)
	<-sc.entered
	cancels[leaving]()
	sc.release()
	wg.Wait()

	for _, i := range []int{left, leaving} {
		if !errors.Is(errs[i], context.Canceled) || jobs[i] != nil {
			t.Fatalf("claim %d, whose context ended: %v, %v", i, jobs[i], errs[i])
		}
	}
	for i, j := range jobs[:left] {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if j.ID() != ids[i] || j.Attempt() != 1 {
			t.Errorf("claim %d (in order of arrival) got job %d attempt %d, want %d attempt 1", i, j.ID(), j.Attempt(), ids[i])
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
	if s, err := qs[0].Stats(ctx); err != nil || s.InFlight != left || s.Ready != 2 {
		t.Fatalf("Stats = %+v, %v; want %d in flight and the last 2 ready", s, err, left)
	}
	// The job claimed for the caller that left, given back, then the one
	// never claimed.
	var again []*baton.Job
	for k, want := range []int{2, 1} {
		j, err := qs[0].TryClaim(ctx)
		if err != nil || j.ID() != ids[left+k] || j.Attempt() != want {
			t.Fatalf("TryClaim %d after the cancelled claims: %v, %v; want job %d attempt %d", k, j, err, ids[left+k], want)
		}
		again = append(again, j)
	}
	for _, j := range append(jobs[:left], again...) {
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := qs[0].Stats(ctx); err != nil || s != (baton.QueueStats{}) {
		t.Fatalf("Stats = %+v, %v; want an empty queue", s, err)
	}
}

// stalling is a Backend whose client holds one chosen transaction back
// until released: a call whose request waits holds its batch open while
// others come.
type stalling struct {
	b       baton.Backend
	d       *backend
	entered chan struct{} // the chosen transaction waits
	txns    atomic.Int64  // transactions sent

	mu   sync.Mutex
	at   int64         // guarded by mu: the number of the one that waits; 0: none
	gate chan struct{} // guarded by mu: closed when it may go
}

func newStalling(t *testing.T, c *cluster, prefix string) *stalling {
	t.Helper()
	s := &stalling{entered: make(chan struct{}, 1)}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{c.members[0].url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == "/etcdserverpb.KV/Txn" {
				n := s.txns.Add(1)
				s.mu.Lock()
				wait, gate := n == s.at, s.gate
				s.mu.Unlock()
				if wait {
					s.entered <- struct{}{}
					<-gate
				}
			}
			return invoke(ctx, method, req, reply, cc, opts...)
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	o, err := buildOptions([]lease.Option{lease.WithTTL(2 * time.Second), lease.WithRenewEvery(200 * time.Millisecond), lease.WithPrefix(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	s.d = newBackend(cl, false, o)
	s.b = baton.NewBackend(s.d)
	t.Cleanup(func() { s.b.Close() })
	return s
}

// stallNext holds back the k-th transaction from now.
func (s *stalling) stallNext(k int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at, s.gate = s.txns.Load()+k, make(chan struct{})
}

// stallThen lets the waiting transaction go and holds back the k-th
// after it.
func (s *stalling) stallThen(k int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
	s.at, s.gate = s.at+k, make(chan struct{})
}

// release lets the waiting transaction go.
func (s *stalling) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
	s.at = 0
}

// testQueueGatheredEnds: the ends of claims of several handles that come
// while one runs are made by one request, each ending its claim only if
// the claim still holds its key (an end of a claim that lost it reports
// ErrLost and changes nothing), and two ends that write one key (a lost
// claim of a job and the job's claim since) each in a request of its own.
func testQueueGatheredEnds(t *testing.T, c *cluster) {
	const n = 4
	sc := newStalling(t, c, "qends/")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := sc.b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	specs := make([]baton.JobSpec, n)
	for i := range specs {
		specs[i].Payload = []byte{byte(i)}
	}
	if _, err := q.PutBatch(ctx, specs); err != nil {
		t.Fatal(err)
	}
	type end struct {
		qd *queueDriver
		dc driver.Claim
	}
	var ends []end
	for range n {
		dq, err := sc.d.OpenQueue(ctx, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		qd := dq.(*queueDriver)
		defer qd.Close()
		cs, err := qd.Claim(ctx, 1, false)
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim: %v, %v", cs, err)
		}
		ends = append(ends, end{qd, cs[0]})
	}
	// Claims that no longer hold their keys, as if lost: one of a job no
	// other end here names, one of a job another end here ends too.
	stale := func(e end) end {
		c := *e.dc.Data.(*qclaim)
		c.rev--
		c.loss, c.hw = driver.NewLoss(), &holdWatch{} // the real claim's stay its own
		dc := e.dc
		dc.Data, dc.Loss = &c, c.loss
		return end{e.qd, dc}
	}
	staleOnly := stale(ends[n-1])
	ends = append(ends[:n-1], stale(ends[n-2]))
	kept := ends[n-1:] // the stale claim of job n-2, beside its real one
	ends = ends[:n-1]  // ends of jobs 0..n-2 that hold their keys
	ends = append(ends, staleOnly)
	ends = append(ends, kept...)

	sc.stallNext(1)
	before := sc.txns.Load()
	errs := make([]error, len(ends))
	var wg sync.WaitGroup
	for i, e := range ends {
		wg.Go(func() { errs[i] = e.qd.Ack(ctx, e.dc) })
		if i == 0 {
			<-sc.entered
			continue
		}
		for e.qd.calls.ends.Waiting() < i {
			time.Sleep(time.Millisecond)
		}
	}
	sc.release()
	wg.Wait()
	for i, err := range errs {
		if wantLost := i >= n-1; errors.Is(err, baton.ErrLost) != wantLost || (!wantLost && err != nil) {
			t.Errorf("end %d: %v (lost wanted: %v)", i, err, wantLost)
		}
	}
	// The stalled one, one for the others that hold and the stale claim of
	// job n-1, one for the stale claim of job n-2.
	if got := sc.txns.Load() - before; got != 3 {
		t.Errorf("%d ends made %d requests, want 3", len(ends), got)
	}
	if s, err := q.Stats(ctx); err != nil || s != (baton.QueueStats{InFlight: 1}) {
		t.Fatalf("Stats = %+v, %v; want job %d still claimed", s, err, n-1)
	}
}
