package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
)

// Server faults, limits and claim paths of etcd's queues, on one server of
// their own.
func TestQueue(t *testing.T) {
	c := startCluster(t, 1)
	t.Run("RevokedClaimant", func(t *testing.T) { testQueueRevokedClaimant(t, c) })
	t.Run("RequestLimit", func(t *testing.T) { testQueueRequestLimit(t, c) })
	t.Run("ForeignCleanup", func(t *testing.T) { testQueueForeignCleanup(t, c) })
	t.Run("PutRoundTrips", func(t *testing.T) { testQueuePutRoundTrips(t, c) })
	t.Run("MixedVersions", func(t *testing.T) { testQueueMixedVersions(t, c) })
	t.Run("GatheredClaims", func(t *testing.T) { testQueueGatheredClaims(t, c) })
	t.Run("GatheredEnds", func(t *testing.T) { testQueueGatheredEnds(t, c) })
	t.Run("WindowOrder", func(t *testing.T) { testQueueWindowOrder(t, c) })
	t.Run("WindowCut", func(t *testing.T) { testQueueWindowCut(t, c) })
	t.Run("ReadsSkipEnded", func(t *testing.T) { testQueueReadsSkipEnded(t, c) })
	t.Run("BelowFloor", func(t *testing.T) { testQueueBelowFloor(t, c) })
	t.Run("UnsureEnds", func(t *testing.T) { testQueueUnsureEnds(t, c) })
	t.Run("ClaimantsOfOneBackendTryDifferentJobs", func(t *testing.T) { testQueueClaimantsOfOneBackendTryDifferentJobs(t, c) })
	t.Run("ClaimantsOfManyBackendsSpread", func(t *testing.T) { testQueueClaimantsOfManyBackendsSpread(t, c) })
	t.Run("Inspector", func(t *testing.T) {
		b, _ := fast(t, c, "qinspect/")
		queuecheck.Inspector(t, b, "a/jobs")
	})
}

// testQueueRevokedClaimant: the lease of a claimant is revoked by another
// client; a claimant blocked on the empty queue is woken by the claim's
// deletion, and by the time it has the job the first claim is lost; the
// first claimant's Ack then returns ErrLost and changes nothing.
func testQueueRevokedClaimant(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b1, d1 := fast(t, c, "qrevoke/")
	b2, _ := fast(t, c, "qrevoke/")
	q1, err := b1.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	q2, err := b2.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q1.Put(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	j1, err := q1.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type claimed struct {
		j       *baton.Job
		lostYet bool
		err     error
	}
	got := make(chan claimed, 1)
	go func() {
		j, err := q2.Claim(ctx)
		got <- claimed{j, err == nil && j1.Err() != nil, err}
	}()
	time.Sleep(100 * time.Millisecond) // the second claimant is waiting
	if _, err := c.client(t).Revoke(ctx, leaseOf(t, d1)); err != nil {
		t.Fatal(err)
	}
	var r claimed
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the job of a revoked claim was not given to the waiting claimant")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.lostYet {
		t.Error("the job was given to another claimant while the revoked claim was trusted")
	}
	if r.j.ID() != j1.ID() || r.j.Attempt() != 2 || r.j.Token() <= j1.Token() {
		t.Errorf("second claim: id %d attempt %d token %d; first id %d token %d", r.j.ID(), r.j.Attempt(), r.j.Token(), j1.ID(), j1.Token())
	}
	if err := j1.Ack(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Ack of the revoked claim: %v, want ErrLost", err)
	}
	if s, err := q2.Stats(ctx); err != nil || s != (baton.QueueStats{InFlight: 1}) {
		t.Errorf("after the lost claim's Ack: %+v, %v", s, err)
	}
	if err := r.j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// testQueueRequestLimit: a batch over what one etcd request carries is
// refused before anything is written.
func testQueueRequestLimit(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, _ := fast(t, c, "qlimit/")
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, q.MaxPayload())
	_, err = q.PutBatch(ctx, []baton.JobSpec{{Payload: big}, {Payload: big}})
	if !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("PutBatch of two payloads of MaxPayload: %v, want ErrInvalidArgument", err)
	}
	if _, err := q.Put(ctx, big); err != nil {
		t.Errorf("Put of MaxPayload bytes: %v", err)
	}
	if s, err := q.Stats(ctx); err != nil || s != (baton.QueueStats{Ready: 1}) {
		t.Errorf("Stats = %+v, %v; want the one job put", s, err)
	}
	j, err := q.TryClaim(ctx)
	if err != nil || len(j.Payload()) != len(big) {
		t.Fatalf("TryClaim: %v", err)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// testQueueForeignCleanup: a session's clean-up of a claim key it may
// have written (a claim whose outcome it does not know) leaves the key
// alone once another session's claim, or another claim of its own, has
// it: a claim key names the job, and the later claim must stay.
func testQueueForeignCleanup(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, d1 := fast(t, c, "qforeign/")
	b2, d2 := fast(t, c, "qforeign/")
	s1, err := d1.session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := must(b2.Queue(ctx, "jobs")).get(t)
	must(q.Put(ctx, []byte("x"))).get(t)
	j := must(q.Claim(ctx)).get(t)
	qd := &queueDriver{b: d1, dir: d1.dir(baton.KindQueue, "jobs")}
	ck := qd.ckey(uint64(j.ID()))
	if !d1.deleteKeys(ctx, s1, []string{ck}, 5*time.Second) {
		t.Fatal("the clean-up request failed")
	}
	if r := must(c.client(t).Get(ctx, ck)).get(t); len(r.Kvs) != 1 {
		t.Fatalf("another session's clean-up deleted the claim key %s", ck)
	}
	// The claimant's own session cleaning up an earlier claim of the job
	// (another value) leaves the current claim alone too.
	s2, err := d2.session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !d2.deleteKeys(ctx, s2, []string{guardKey(ck, "an earlier claim")}, 5*time.Second) {
		t.Fatal("the clean-up request failed")
	}
	if r := must(c.client(t).Get(ctx, ck)).get(t); len(r.Kvs) != 1 {
		t.Fatalf("the clean-up of an earlier claim deleted the claim key %s", ck)
	}
	if err := j.Ack(ctx); err != nil {
		t.Errorf("Ack after another session's clean-up: %v", err)
	}
}
