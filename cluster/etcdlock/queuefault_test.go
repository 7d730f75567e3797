package etcdlock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/fence"
)

// testQueueLeaderKill: claimants of clients of every member work through
// a queue while the leader is SIGKILLed (and later restarted). Each job's
// effect is a counter behind a fence of its own, applied once under the
// claim's token. No job is lost and each effect is applied exactly once;
// no job is claimed while an earlier claim of it is neither ended nor
// reported lost; a job claimed again has a greater token.
func testQueueLeaderKill(t *testing.T, c *cluster) {
	const (
		jobs    = 300
		workers = 4
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	open := func() baton.Queue {
		b := must(OpenURL(ctx, c.url("qleader"), lease.WithTTL(3*time.Second), lease.WithRequestTimeout(time.Second),
			lease.WithLogger(slog.New(slog.DiscardHandler)))).get(t)
		t.Cleanup(func() { b.Close() })
		return must(b.Queue(ctx, "jobs")).get(t)
	}
	specs := make([]baton.JobSpec, jobs)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: []byte(strconv.Itoa(i))}
	}
	producer := open()
	for i := 0; i < jobs; i += 100 {
		must(producer.PutBatch(ctx, specs[i:i+100])).get(t)
	}
	var (
		mu      sync.Mutex
		guards  [jobs]fence.Guard
		effects [jobs]int
		live    = map[baton.JobID]*baton.Job{}  // guarded by mu: claims neither ended nor known lost
		tokens  = map[baton.JobID]baton.Token{} // guarded by mu: the last token of each job
		claims  = map[baton.JobID]int{}         // guarded by mu: how many times each job was claimed
		lostAck = map[baton.JobID]bool{}        // guarded by mu: jobs an Ack of found lost
		acked   atomic.Int64
		again   atomic.Int64 // jobs claimed again after a lost claim
		errs    atomic.Int64
		wg      sync.WaitGroup
	)
	// The workers stop when the queue is empty, not at the count of Acks
	// that returned nil: an Ack of a claim lost to the leader's death
	// returns ErrLost, and its job is acked by another claimant.
	var finished atomic.Bool
	work := func(q baton.Queue, w int) {
		for !finished.Load() && ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			j, err := q.Claim(cctx)
			ccancel()
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) {
					errs.Add(1)
					t.Logf("worker %d: claim: %v", w, err)
					time.Sleep(20 * time.Millisecond)
				}
				continue
			}
			idx, err := strconv.Atoi(string(j.Payload()))
			if err != nil || idx < 0 || idx >= jobs {
				t.Errorf("worker %d: job %d: payload %q", w, j.ID(), j.Payload())
				continue
			}
			mu.Lock()
			if prev := live[j.ID()]; prev != nil && prev.Err() == nil {
				t.Errorf("job %d claimed (token %d) while an earlier claim (token %d) is neither ended nor lost", j.ID(), j.Token(), prev.Token())
			}
			if last, ok := tokens[j.ID()]; ok {
				again.Add(1)
				if j.Token() <= last {
					t.Errorf("job %d claimed again with token %d after %d", j.ID(), j.Token(), last)
				}
			}
			live[j.ID()], tokens[j.ID()] = j, j.Token()
			claims[j.ID()]++
			mu.Unlock()
			err = guards[idx].Do(j.Token(), func() error {
				mu.Lock()
				defer mu.Unlock()
				if effects[idx] == 0 { // not done by a claimant lost before its Ack
					effects[idx]++
				}
				return nil
			})
			if err != nil && !errors.Is(err, fence.ErrStale) {
				t.Errorf("job %d: fence: %v", j.ID(), err)
			}
			time.Sleep(2 * time.Millisecond)
			for try := 0; ; try++ {
				err = j.Ack(ctx)
				if err == nil || errors.Is(err, baton.ErrLost) || try == 5 {
					break
				}
				time.Sleep(100 * time.Millisecond) // an outcome unknown: the core lets it be tried again
			}
			mu.Lock()
			if live[j.ID()] == j {
				delete(live, j.ID())
			}
			mu.Unlock()
			switch {
			case err == nil:
				acked.Add(1)
			case errors.Is(err, baton.ErrLost):
				t.Logf("worker %d: job %d: claim lost: %v", w, j.ID(), err)
				mu.Lock()
				lostAck[j.ID()] = true
				mu.Unlock()
			default:
				errs.Add(1)
				t.Logf("worker %d: job %d: ack: %v", w, j.ID(), err)
			}
		}
	}
	for w := range workers {
		q := open()
		wg.Go(func() { work(q, w) })
	}
	for acked.Load() < jobs/3 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	l := c.leader(t, c.client(t))
	t.Logf("killing the leader m%d after %d acks", l, acked.Load())
	c.kill(l)
	killedAt := acked.Load()
	for ctx.Err() == nil {
		if s, err := producer.Stats(ctx); err == nil && s == (baton.QueueStats{}) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	finished.Store(true)
	wg.Wait()
	c.restart(t, l)
	if ctx.Err() != nil {
		t.Fatalf("the queue was not empty before the test's time ran out (%d of %d jobs acked)", acked.Load(), jobs)
	}
	for i, n := range effects {
		if n != 1 {
			t.Errorf("job %d's effect applied %d times", i, n)
		}
	}
	// A lost claim's job is claimed again before the queue is empty: an
	// Ack that reported its claim lost when nobody claimed the job again
	// had in fact taken effect (an earlier try of it, whose answer the
	// leader's death cut off).
	for id := range lostAck {
		if claims[id] == 1 {
			t.Errorf("job %d: its Ack returned ErrLost, yet nobody claimed it again", id)
		}
	}
	s := must(producer.Stats(ctx)).get(t)
	if s != (baton.QueueStats{}) {
		t.Errorf("after every job was acked: %+v, want an empty queue", s)
	}
	t.Logf("%d jobs acked, %d after the leader was killed, %d claimed again, %d errors", acked.Load(), int64(jobs)-killedAt, again.Load(), errs.Load())
}
