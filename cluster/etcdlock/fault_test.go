package etcdlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// Acquisitions cancelled while their key is being written leave no key
// behind. The server can apply an abandoned write after the delete that
// was meant to take it back, so a driver that cancels the write itself
// leaves keys that block the name until its session ends.
func testCancelledWrites(t *testing.T, c *cluster) {
	ctx := context.Background()
	ba, _ := fast(t, c, "cancelwrite")
	bb, _ := fast(t, c, "cancelwrite")
	holder := must(ba.Mutex(ctx, "m")).get(t)
	must(holder.Lock(ctx)).get(t)
	sholder := must(ba.Semaphore(ctx, "s", 1)).get(t)
	must(sholder.Acquire(ctx, 1)).get(t)
	m := must(bb.Mutex(ctx, "m")).get(t)
	s := must(bb.Semaphore(ctx, "s", 1)).get(t)
	for i := range 200 {
		// 0 to 4 ms: a write on this cluster takes about 2 ms.
		d := time.Duration(i%20) * 200 * time.Microsecond
		cctx, cancel := context.WithTimeout(ctx, d)
		if _, err := m.Lock(cctx); err == nil {
			t.Fatal("Lock beside a holder succeeded")
		}
		if _, err := m.TryLock(cctx); err == nil {
			t.Fatal("TryLock beside a holder succeeded")
		}
		if _, err := s.Acquire(cctx, 1); err == nil {
			t.Fatal("Acquire beside a holder succeeded")
		}
		cancel()
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sholder.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Every key of a cancelled attempt is deleted when the answer to its
	// write comes, a few ms after the cancel.
	cl := c.client(t)
	var left []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left = left[:0]
		ks, err := keys(ctx, cl, "cancelwrite/")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			if strings.Contains(k, "/q/") {
				left = append(left, k)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) != 0 {
		t.Fatalf("keys of cancelled acquisitions left: %v", left)
	}
	must(m.TryLock(ctx)).get(t)
	must(s.TryAcquire(ctx, 1)).get(t)
}

// Killing the leader while workers contend: no two holds overlap, tokens
// only grow, and the workers go on with the new leader.
func testStopLeader(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const workers = 4
	var (
		inside, overlaps atomic.Int32
		mu               sync.Mutex
		lastToken        baton.Token // guarded by mu
		order            []baton.Token
		after            atomic.Int64 // acquisitions after the stop
		stopped          atomic.Bool
		errs             atomic.Int64
		wg               sync.WaitGroup
	)
	done := make(chan struct{})
	for w := range workers {
		b := must(OpenURL(ctx, "etcd://"+strings.Join(c.endpoints(), ",")+"/leader", lease.WithTTL(3*time.Second), lease.WithRequestTimeout(2*time.Second))).get(t)
		t.Cleanup(func() { b.Close() })
		m := must(b.Mutex(ctx, "m")).get(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				h, err := m.Lock(ctx)
				if err != nil {
					errs.Add(1)
					t.Logf("worker %d: lock: %v", w, err)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				if h.Token() <= lastToken {
					t.Errorf("token %d after %d", h.Token(), lastToken)
				}
				lastToken = h.Token()
				order = append(order, h.Token())
				mu.Unlock()
				if stopped.Load() {
					after.Add(1)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := m.Unlock(ctx); err != nil && !errors.Is(err, baton.ErrLost) {
					errs.Add(1)
					t.Logf("worker %d: unlock: %v", w, err)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	l := c.leader(t, c.client(t))
	mu.Lock()
	n := len(order)
	mu.Unlock()
	t.Logf("killing leader m%d after %d acquisitions", l, n)
	c.kill(l)
	stopped.Store(true)
	deadline := time.Now().Add(20 * time.Second)
	for after.Load() < 50 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Errorf("%d overlapping holds", overlaps.Load())
	}
	if after.Load() < 50 {
		t.Errorf("only %d acquisitions after the leader stopped", after.Load())
	}
	t.Logf("%d acquisitions, %d after the leader stopped, %d errors", len(order), after.Load(), errs.Load())
}
