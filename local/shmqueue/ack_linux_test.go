//go:build linux

package shmqueue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// claimAck claims n ready jobs and acks them.
func claimAck(t *testing.T, q *Queue, n int) {
	t.Helper()
	ctx := context.Background()
	cs, err := q.Claim(ctx, n, false)
	if err != nil || len(cs) != n {
		t.Fatalf("Claim(%d) = %d claims, %v", n, len(cs), err)
	}
	for _, c := range cs {
		if err := q.Ack(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// An Ack takes no lock: it completes while another process holds the
// queue's lock, and the acked slot is free to the next Put that needs it.
func TestAckTakesNoLock(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	put(t, q, "x")
	cs, err := q.Claim(ctx, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	// A live holder: this process, as if another handle of it held it.
	q.u64(offLock).Store(q.me)
	done := make(chan error, 1)
	go func() { done <- q.Ack(ctx, cs[0]) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Ack: %v", err)
		}
	case <-time.After(5 * time.Second):
		q.u64(offLock).Store(0)
		<-done
		t.Fatal("Ack waited for the queue's lock")
	}
	q.u64(offLock).Store(0)
	if got := q.sw(cs[0].Data.(uint32), sState).Load() & 0xff; got != stAcked {
		t.Errorf("state after Ack = %d, want acked", got)
	}
	if err := q.Ack(ctx, cs[0]); !errors.Is(err, baton.ErrLost) {
		t.Errorf("a second Ack of the claim: %v, want ErrLost", err)
	}
	if s, _ := q.Stats(ctx); s != (driver.QueueStats{}) {
		t.Errorf("Stats after the Ack = %+v, want all 0", s)
	}
}

// Acked slots are swept into the free stack when Puts need them: a queue
// that turns over many times its capacity never fills, and one full of
// pending jobs takes exactly as many more as were acked.
func TestAckedSlotsSwept(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	job := []driver.PutJob{{Payload: []byte("j"), MaxAttempts: 1}}
	for range 3 * Capacity {
		if _, err := q.Put(ctx, job); err != nil {
			t.Fatal(err)
		}
		cs, err := q.Claim(ctx, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, cs[0]); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.u64(offAcked).Load(); n > Capacity {
		t.Errorf("%d acked slots counted, more than the capacity", n)
	}
	batch := make([]driver.PutJob, Capacity)
	for i := range batch {
		batch[i] = job[0]
	}
	if _, err := q.Put(ctx, batch); err != nil {
		t.Fatalf("Put of a whole capacity after the turnover: %v", err)
	}
	claimAck(t, q, 3)
	if _, err := q.Put(ctx, batch[:4]); !errors.Is(err, baton.ErrFull) {
		t.Fatalf("Put of 4 with 3 acked: %v, want ErrFull", err)
	}
	if _, err := q.Put(ctx, batch[:3]); err != nil {
		t.Fatalf("Put of 3 with 3 acked: %v", err)
	}
	if s, _ := q.Stats(ctx); s.Ready != Capacity-3+3 || s.InFlight != 0 {
		t.Errorf("Stats = %+v, want %d ready", s, Capacity)
	}
}

// A queue that is never deep reuses its slots: acked ones go back to the
// free stack before a fresh slot (a page never written) is touched.
func TestAckedSlotsReused(t *testing.T) {
	q := open(t)
	for range 500 {
		put(t, q, "a")
		put(t, q, "b")
		claimAck(t, q, 2)
	}
	if used := q.u64(offFresh).Load(); used > 2 {
		t.Errorf("%d slots used for 2 jobs at a time, want 2", used)
	}
}

// A claimant killed inside an Ack, after it counted the slot and before
// its compare-and-swap, leaves the count above the slots to sweep: a Put
// then sweeps for nothing, and refuses only what does not fit.
func TestAckKilledBeforeItsSwap(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	batch := make([]driver.PutJob, Capacity)
	for i := range batch {
		batch[i] = driver.PutJob{Payload: []byte("j"), MaxAttempts: 1}
	}
	if _, err := q.Put(ctx, batch); err != nil {
		t.Fatal(err)
	}
	q.u64(offAcked).Add(1) // the dead claimant's count, its slot still claimed
	if _, err := q.Put(ctx, batch[:1]); !errors.Is(err, baton.ErrFull) {
		t.Fatalf("Put into a full queue: %v, want ErrFull", err)
	}
	cs, err := q.Claim(ctx, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(ctx, cs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put(ctx, batch[:1]); err != nil {
		t.Fatalf("Put after an Ack: %v", err)
	}
}

// A lock holder killed with acked slots left: the rebuild frees them with
// the rest, and the count drops by as many.
func TestRebuildFreesAcked(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	for _, p := range []string{"a", "b", "c"} {
		put(t, q, p)
	}
	claimAck(t, q, 2)
	before := q.room(0)
	q.u64(offLock).Store(deadProc(t))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s, err := q.Stats(cctx); err != nil || s != (driver.QueueStats{Ready: 1}) {
		t.Fatalf("Stats after the takeover = %+v, %v; want 1 ready", s, err)
	}
	if got := q.room(0); got != before+2 {
		t.Errorf("room after the rebuild %d, want %d: the acked slots are free", got, before+2)
	}
	if n := q.u64(offAcked).Load(); n != 0 {
		t.Errorf("acked count after the rebuild %d, want 0", n)
	}
}

// Many claimants ack while a producer's Puts sweep: every job is claimed
// once and acked once, and the queue never reports itself full.
func TestAckRacesSweep(t *testing.T) {
	ctx := context.Background()
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	openQ := func() *Queue {
		q, err := OpenEntry(ns.Resolve(Kind, "q"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	p := openQ()
	const claimants, jobs = 4, 4 * Capacity
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := make(map[uint64]bool, jobs)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, claimants+1)
	for range claimants {
		c := openQ()
		wg.Go(func() {
			for {
				cs, err := c.Claim(cctx, 3, true)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						errc <- err
					}
					return
				}
				for _, cl := range cs {
					mu.Lock()
					dup := seen[cl.ID]
					seen[cl.ID] = true
					n := len(seen)
					mu.Unlock()
					if dup {
						errc <- errors.New("a job claimed twice")
					}
					if err := c.Ack(ctx, cl); err != nil {
						errc <- err
					}
					if n == jobs {
						cancel()
					}
				}
			}
		})
	}
	job := []driver.PutJob{{Payload: []byte("j"), MaxAttempts: 1}}
	for put := 0; put < jobs; {
		if _, err := p.Put(ctx, job); errors.Is(err, baton.ErrFull) {
			time.Sleep(time.Microsecond)
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		put++
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if len(seen) != jobs {
		t.Errorf("%d jobs claimed, want %d", len(seen), jobs)
	}
	if s, _ := p.Stats(ctx); s != (driver.QueueStats{}) {
		t.Errorf("Stats at the end = %+v, want all 0", s)
	}
}
