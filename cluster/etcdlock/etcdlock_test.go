package etcdlock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/locktest"
)

// The backend tests share one single-member server.
// The member compacts its history as a server in service does, so that
// the suite meets ErrCompacted where a server would give it, and the
// queue's kill test measures reads that walk only recent deletions (see
// the package doc).
func TestOneMember(t *testing.T) {
	c := startClusterKeeping(t, 1, "5s")
	t.Run("Conformance", func(t *testing.T) {
		locktest.Run(t, suite1, c.url("lt1"))
		checkEmpty(t, c, "lt1/")
	})
	t.Run("RevokedHolder", func(t *testing.T) { testRevokedHolder(t, c) })
	t.Run("QueuedWaiterLeaseGone", func(t *testing.T) { testQueuedWaiterLeaseGone(t, c) })
	t.Run("SharedSessionHandles", func(t *testing.T) { testSharedSessionHandles(t, c) })
	t.Run("Downgrade", func(t *testing.T) { testDowngrade(t, c) })
	t.Run("SemaphoreFIFO", func(t *testing.T) { testSemaphoreFIFO(t, c) })
	t.Run("Inspector", func(t *testing.T) { testInspector(t, c) })
	t.Run("RemovedHold", func(t *testing.T) { testRemovedHold(t, c) })
	t.Run("SharedHoldWatch", func(t *testing.T) { testSharedHoldWatch(t, c) })
	t.Run("ReleasedNotLost", func(t *testing.T) { testReleasedNotLost(t, c) })
	t.Run("RemoveRacesUnlock", func(t *testing.T) { testRemoveRacesUnlock(t, c) })
	t.Run("NamesDisjoint", func(t *testing.T) { testNamesDisjoint(t, c) })
	t.Run("CutOffHolder", func(t *testing.T) { testCutOffHolder(t, c) })
	t.Run("UnnoticedLeaseGone", func(t *testing.T) { testUnnoticedLeaseGone(t, c) })
	t.Run("CancelledWrites", func(t *testing.T) { testCancelledWrites(t, c) })
	t.Run("Pass", func(t *testing.T) { testPass(t, c) })
	t.Run("ForeignGrant", func(t *testing.T) { testForeignGrant(t, c) })
}

// The 3-member tests share one cluster; the leader is stopped last.
func TestThreeMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("3-member cluster in -short")
	}
	c := startCluster(t, 3)
	t.Run("Conformance", func(t *testing.T) {
		locktest.Run(t, suite3, c.url("lt3"))
		checkEmpty(t, c, "lt3/")
	})
	t.Run("CancelledWrites", func(t *testing.T) { testCancelledWrites(t, c) })
	t.Run("LaggingWatchMember", func(t *testing.T) { testLaggingWatchMember(t, c) })
	t.Run("StopLeader", func(t *testing.T) { testStopLeader(t, c) })
}

// fast opens a backend with a short TTL and renewal, closed with the test.
func fast(t *testing.T, c *cluster, prefix string) (baton.Backend, *backend) {
	t.Helper()
	return withTTL(t, c, prefix, 2*time.Second)
}

// withTTL is fast with another lease TTL, renewed ten times a TTL.
func withTTL(t *testing.T, c *cluster, prefix string, ttl time.Duration) (baton.Backend, *backend) {
	t.Helper()
	o, err := buildOptions([]lease.Option{lease.WithTTL(ttl), lease.WithRenewEvery(ttl / 10), lease.WithPrefix(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	d := newBackend(c.client(t), false, o)
	b := baton.NewBackend(d)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b, d
}

func leaseOf(t *testing.T, d *backend) clientv3.LeaseID {
	t.Helper()
	s := d.cur.Load()
	if s == nil {
		t.Fatal("no session")
	}
	return s.id
}

// must(f()).get(t) is f's value, or the end of the test if f failed.
func must[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) get(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// A holder whose lease is revoked sees its loss, the next waiter holds, and
// the old holder's Unlock reports the loss without touching the new
// holder's key.
func testRevokedHolder(t *testing.T, c *cluster) {
	ctx := context.Background()
	ba, da := fast(t, c, "revoked")
	bb, _ := fast(t, c, "revoked")
	ma := must(ba.Mutex(ctx, "m")).get(t)
	mb := must(bb.Mutex(ctx, "m")).get(t)
	ha := must(ma.Lock(ctx)).get(t)
	got := make(chan baton.Hold, 1)
	go func() {
		h, err := mb.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.client(t).Revoke(ctx, leaseOf(t, da)); err != nil {
		t.Fatal(err)
	}
	var hb baton.Hold
	select {
	case hb = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not get the lock of a revoked holder")
	}
	if hb.Token() <= ha.Token() {
		t.Errorf("token %d after %d", hb.Token(), ha.Token())
	}
	select {
	case <-ha.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("revoked holder's loss did not fire")
	}
	if !errors.Is(ha.Err(), baton.ErrLost) {
		t.Errorf("Err() = %v", ha.Err())
	}
	if err := ma.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock of a revoked hold: %v, want ErrLost", err)
	}
	// The new holder's key is still there, and it alone holds.
	in := must(bb.(baton.Inspector).Inspect(ctx, baton.KindMutex, "m")).get(t)
	if len(in.Holders) != 1 || in.Holders[0].Token != hb.Token() {
		t.Errorf("holders after the old holder's Unlock: %+v, want token %d", in.Holders, hb.Token())
	}
	if _, err := ma.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Errorf("TryLock while the other holds: %v", err)
	}
	if err := mb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The revoked backend works again on a new lease.
	h := must(ma.Lock(ctx)).get(t)
	if h.Err() != nil || leaseOf(t, da) == 0 {
		t.Errorf("hold on a new session: %v", h.Err())
	}
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiter whose lease goes while it is queued gets ErrLost, not the lock.
func testQueuedWaiterLeaseGone(t *testing.T, c *cluster) {
	ctx := context.Background()
	ba, _ := fast(t, c, "queued")
	bb, db := fast(t, c, "queued")
	ma := must(ba.Mutex(ctx, "m")).get(t)
	mb := must(bb.Mutex(ctx, "m")).get(t)
	must(ma.Lock(ctx)).get(t)
	got := make(chan error, 1)
	go func() {
		_, err := mb.Lock(ctx)
		got <- err
	}()
	// The waiter's session is made by its Lock: wait for it (a loaded
	// machine may take longer than the sleep that lets it queue).
	for deadline := time.Now().Add(10 * time.Second); db.cur.Load() == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := c.client(t).Revoke(ctx, leaseOf(t, db)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, baton.ErrLost) {
			t.Errorf("queued waiter whose lease was revoked: %v, want ErrLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("queued waiter whose lease was revoked still waits")
	}
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// And once the holder left, a new Lock of the same handle works.
	must(mb.Lock(ctx)).get(t)
	if err := mb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Handles of one Backend share its lease; they still exclude each other.
func testSharedSessionHandles(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, _ := fast(t, c, "shared")
	const handles, iters = 8, 25
	var inside, overlaps atomic.Int32
	var last atomic.Uint64
	var wg sync.WaitGroup
	for range handles {
		m := must(b.Mutex(ctx, "m")).get(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iters {
				h, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				if prev := last.Swap(uint64(h.Token())); prev >= uint64(h.Token()) {
					t.Errorf("token %d after %d", h.Token(), prev)
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Errorf("%d overlapping holds among handles of one session", overlaps.Load())
	}
}

// Downgrade lets a reader queued behind the writer in, and keeps a writer
// queued after that reader out.
func testDowngrade(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, _ := fast(t, c, "downgrade")
	w1 := must(b.RWMutex(ctx, "rw")).get(t)
	w2 := must(b.RWMutex(ctx, "rw")).get(t)
	r := must(b.RWMutex(ctx, "rw")).get(t)
	h1 := must(w1.Lock(ctx)).get(t)
	rgot := make(chan error, 1)
	go func() {
		_, err := r.RLock(ctx)
		rgot <- err
	}()
	time.Sleep(100 * time.Millisecond) // the reader queues before w2
	w2got := make(chan error, 1)
	go func() {
		_, err := w2.Lock(ctx)
		w2got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-rgot:
		t.Fatalf("reader got in past a writer: %v", err)
	default:
	}
	hd := must(w1.Downgrade(ctx)).get(t)
	if hd.Token() != h1.Token() || hd.Mode() != baton.Shared {
		t.Errorf("downgraded hold: token %d mode %v, want %d shared", hd.Token(), hd.Mode(), h1.Token())
	}
	select {
	case err := <-rgot:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("reader queued behind the writer did not get in after the downgrade")
	}
	select {
	case err := <-w2got:
		t.Fatalf("writer got in while readers hold: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := w1.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w2got:
		t.Fatalf("writer got in while a reader holds: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w2got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("writer did not get in after the readers left")
	}
	if err := w2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Requests are served in order: a small one waits behind a large one that
// does not fit yet; the capacity is checked against the recorded one.
func testSemaphoreFIFO(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, _ := fast(t, c, "sem")
	a := must(b.Semaphore(ctx, "s", 3)).get(t)
	if _, err := b.Semaphore(ctx, "s", 4); !errors.Is(err, baton.ErrMismatch) {
		t.Errorf("open with another capacity: %v, want ErrMismatch", err)
	}
	big := must(b.Semaphore(ctx, "s", 3)).get(t)
	small := must(b.Semaphore(ctx, "s", 3)).get(t)
	must(a.Acquire(ctx, 2)).get(t)
	bigGot := make(chan error, 1)
	go func() {
		_, err := big.Acquire(ctx, 2)
		bigGot <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := small.TryAcquire(ctx, 1); !errors.Is(err, baton.ErrLocked) {
		t.Errorf("TryAcquire(1) past a queued Acquire(2): %v, want ErrLocked", err)
	}
	smallGot := make(chan error, 1)
	go func() {
		_, err := small.Acquire(ctx, 1)
		smallGot <- err
	}()
	select {
	case err := <-smallGot:
		t.Fatalf("Acquire(1) overtook a queued Acquire(2): %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	// a keeps 1: big's 2 fit, small's 1 more would not.
	if err := a.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bigGot:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("queued Acquire(2) did not get its permits after a partial release")
	}
	select {
	case err := <-smallGot:
		t.Fatalf("Acquire(1) got a permit beyond the capacity: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	in := must(b.(baton.Inspector).Inspect(ctx, baton.KindSemaphore, "s")).get(t)
	var held int64
	for _, h := range in.Holders {
		held += h.N
	}
	if held != 3 || in.Capacity != 3 || in.Waiters != 1 {
		t.Errorf("permits held %d of capacity %d, %d waiting (info %+v)", held, in.Capacity, in.Waiters, in)
	}
	if err := a.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-smallGot:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("queued Acquire(1) did not get its permit")
	}
	if err := big.Release(ctx, 2); err != nil {
		t.Error(err)
	}
	if err := small.Release(ctx, 1); err != nil {
		t.Error(err)
	}
	if err := b.(baton.Inspector).Remove(ctx, baton.KindSemaphore, "s"); err != nil {
		t.Fatal(err)
	}
}

// The Inspector lists holders with pid, host and lease time left, and
// Remove deletes an object.
func testInspector(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, _ := fast(t, c, "inspect")
	in := b.(baton.Inspector)
	m := must(b.Mutex(ctx, "a/b")).get(t)
	h := must(m.Lock(ctx)).get(t)
	// The waiter is of another Backend: one of the holder's own would wait
	// in its Backend for the hold to be passed, not on the server.
	b2, _ := fast(t, c, "inspect")
	m2 := must(b2.Mutex(ctx, "a/b")).get(t)
	go func() { _, _ = m2.Lock(ctx) }()
	var info baton.Info
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info = must(in.Inspect(ctx, baton.KindMutex, "a/b")).get(t)
		if info.Waiters != 0 || time.Now().After(deadline) {
			break
		}
	}
	host, _ := os.Hostname()
	if len(info.Holders) != 1 || info.Waiters != 1 {
		t.Fatalf("info %+v: want 1 holder, 1 waiter", info)
	}
	hd := info.Holders[0]
	if hd.PID != os.Getpid() || hd.Host != host || hd.Token != h.Token() || hd.TTL <= 0 || time.Since(hd.Since) > time.Minute {
		t.Errorf("holder %+v", hd)
	}
	list := must(in.List(ctx)).get(t)
	if len(list) != 1 || list[0].Name != "a/b" || list[0].Kind != baton.KindMutex {
		t.Errorf("list %+v", list)
	}
	if _, err := in.Inspect(ctx, baton.KindMutex, "nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect of nothing: %v", err)
	}
	if _, err := in.Inspect(ctx, "bogus", "a"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Inspect of a bad kind: %v", err)
	}
	if err := in.Remove(ctx, baton.KindMutex, "a/b"); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock after Remove: %v, want ErrLost", err)
	}
	if err := in.Remove(ctx, baton.KindMutex, "a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second Remove: %v", err)
	}
	_ = m2.Close()
}

// Names that are prefixes of each other, or differ in an encoded
// character, are separate locks.
func testNamesDisjoint(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, _ := fast(t, c, "names")
	names := []string{"a", "a/b", "a%2Fb", "a!", "ab"}
	for _, n := range names {
		m := must(b.Mutex(ctx, n)).get(t)
		if _, err := m.TryLock(ctx); err != nil {
			t.Errorf("TryLock(%q) with the others held: %v", n, err)
		}
	}
	s := must(b.Semaphore(ctx, "x", 1)).get(t)
	must(b.Semaphore(ctx, "x!", 2)).get(t)
	must(s.Acquire(ctx, 1)).get(t)
	if err := b.(baton.Inspector).Remove(ctx, baton.KindSemaphore, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.(baton.Inspector).Inspect(ctx, baton.KindSemaphore, "x!"); err != nil {
		t.Errorf("removing x touched x!: %v", err)
	}
	if err := s.Release(ctx, 1); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Release after Remove: %v, want ErrLost", err)
	}
}
