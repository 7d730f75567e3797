package redislock

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// A waiter whose lease is long checks in rarely (every 10 s here), so a
// release that did not wake it would leave it asleep for seconds. Releases
// land at random moments around the waiter's arrival: before its script
// runs, while it runs, just after it sleeps, and long after; each time the
// waiter must hold well within a check-in period. A wake-up message
// published before the waiter listened, or a release that told nobody,
// fails the test.
func TestWaiterWokenPromptly(t *testing.T) {
	s := startRedis(t)
	url := s.URL("ttl=30s")
	holder := mutex(t, open(t, url), "prompt")
	waiter := mutex(t, open(t, url), "prompt")
	ctx := context.Background()
	const rounds = 60
	const limit = 2 * time.Second // a check-in is 10 s away
	var worst time.Duration
	for i := range rounds {
		if _, err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		held := make(chan time.Time, 1)
		go func() {
			if _, err := waiter.Lock(ctx); err != nil {
				t.Error(err)
				close(held)
				return
			}
			held <- time.Now()
		}()
		// Up to 3 ms: a queued waiter is asleep after about a round trip.
		time.Sleep(time.Duration(rand.Int64N(int64(3 * time.Millisecond))))
		t0 := time.Now()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at, ok := <-held:
			if !ok {
				t.FailNow()
			}
			worst = max(worst, at.Sub(t0))
		case <-time.After(limit):
			t.Fatalf("round %d: the waiter still sleeps %v after the release", i, limit)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("slowest wake-up after a release: %v", worst)
}

// A handoff between two clients publishes once, to the waiter that is
// handed the lock, and the four scripts of a cycle (the holder's Lock, the
// waiter's Lock that queues, the release that hands over, the waiter's
// Unlock) run few commands: each costs a script about as much as a command
// sent alone, and a release is on the path of every handoff.
func TestHandoffCommands(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	keys := mutexKeys(DefaultPrefix, "handoff-cmds")
	holder := mutex(t, open(t, s.URL("")), "handoff-cmds")
	waiter := mutex(t, open(t, s.URL("")), "handoff-cmds")
	ctx := context.Background()
	own := 0 // the test's own ZCARDs
	cycle := func() {
		if _, err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		held := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(ctx)
			held <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			own++
			if n, _ := c.ZCard(ctx, keys[3]).Result(); n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the waiter never queued")
			}
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // loads the scripts and subscribes
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	own = 0
	const n = 10
	for range n {
		cycle()
	}
	calls := commandCalls(t, c)
	defer func() {
		if t.Failed() {
			t.Logf("calls: %v", calls)
		}
	}()
	calls["zcard"] -= own
	if calls["evalsha"] != 4*n {
		t.Errorf("evalsha: %d calls in %d cycles, want %d", calls["evalsha"], n, 4*n)
	}
	if calls["publish"] != n {
		t.Errorf("publish: %d calls in %d handoffs, want %d", calls["publish"], n, n)
	}
	inner := -calls["evalsha"]
	for k, v := range calls {
		if k != "config|resetstat" && k != "info" {
			inner += v
		}
	}
	// 4 + 7 (the line's keys new: RPUSH, ZADD, and their expiries) + 8 +
	// 4 (the line went with the last waiter; the Unlock deletes lwait).
	const most = 23
	if inner > most*n {
		t.Errorf("%d commands in the scripts of %d cycles, want at most %d", inner, n, most*n)
	}
}
