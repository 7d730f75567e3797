package redislock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/redis/go-redis/v9"
)

// TestQueueGathered: the Claims and Acks of a Backend's handles of one
// queue that come while a script of theirs runs are gathered into one
// script: with the server paused, eight handles' claims cost two claim
// scripts (the first, held by the pause, and one for the seven that came
// meanwhile), each handle gets a job of its own, and their acks cost two
// ack scripts likewise.
func TestQueueGathered(t *testing.T) {
	const n = 8
	s := startRedis(t)
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b := open(t, s.URL(""))
	hs := make([]baton.Queue, n)
	for i := range hs {
		hs[i] = queue(t, b, "gathered")
	}
	for range n {
		mustPut(t, hs[0], "job")
	}
	// Loaded first, so that no script is run twice for a NOSCRIPT.
	for _, sc := range []*redis.Script{scriptJobsClaim, scriptJobsAck, scriptJobsAckMany} {
		if err := sc.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// paused runs f on every handle at once while the server holds write
	// commands, and returns how many scripts ran.
	paused := func(k int, f func(i int)) int {
		t.Helper()
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, "client", "pause", "300", "write").Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range k {
			wg.Go(func() { f(i) })
			// Let the first call reach the server before the others come.
			if i == 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
		wg.Wait()
		return commandCalls(t, c)["evalsha"]
	}
	jobs := make([]*baton.Job, n)
	var err error
	claims := paused(n, func(i int) {
		j, err := hs[i].TryClaim(ctx)
		if err != nil {
			t.Error(err)
		}
		jobs[i] = j
	})
	if t.Failed() {
		t.FailNow()
	}
	seen := map[baton.JobID]bool{}
	for _, j := range jobs {
		if seen[j.ID()] {
			t.Fatalf("job %d claimed twice", j.ID())
		}
		seen[j.ID()] = true
	}
	if claims != 2 {
		t.Errorf("%d claims ran %d scripts, want 2", n, claims)
	}
	acks := paused(n, func(i int) {
		if err := jobs[i].Ack(ctx); err != nil {
			t.Error(err)
		}
	})
	if acks != 2 {
		t.Errorf("%d acks ran %d scripts, want 2", n, acks)
	}
	if st, err := hs[0].Stats(ctx); err != nil || st != (baton.QueueStats{}) {
		t.Errorf("after the acks: %+v, %v; want an empty queue", st, err)
	}
	// A lost claim among gathered acks is refused alone: three acks, the
	// last two gathered, the second of a claim the server gave away.
	for range 3 {
		mustPut(t, hs[0], "job")
	}
	for i := range 3 {
		if jobs[i], err = hs[i].TryClaim(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.HSet(ctx, redisnodeKey("gathered", "claim"), sid(jobs[1].ID()), "1").Err(); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 3)
	if acks := paused(3, func(i int) { errs[i] = jobs[i].Ack(ctx) }); acks != 2 {
		t.Errorf("3 acks ran %d scripts, want 2", acks)
	}
	if errs[0] != nil || !errors.Is(errs[1], baton.ErrLost) || errs[2] != nil {
		t.Errorf("acks of a held, a lost and a held claim: %v, %v, %v; want nil, ErrLost, nil", errs[0], errs[1], errs[2])
	}
}
