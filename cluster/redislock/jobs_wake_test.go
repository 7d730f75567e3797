package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestQueueDueAheadOfRetried: a delayed job whose time came is in line as
// of its time, ahead of a job given back after it, though no script made
// it ready in between.
func TestQueueDueAheadOfRetried(t *testing.T) {
	s := startRedis(t)
	q := queue(t, open(t, s.URL("")), "due")
	ctx := context.Background()
	if _, err := q.Put(ctx, []byte("delayed"), baton.Delay(50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	mustPut(t, q, "retried")
	j, err := q.TryClaim(ctx)
	if err != nil || string(j.Payload()) != "retried" {
		t.Fatalf("claimed %v, %v; want the ready job", j, err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := j.Retry(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"delayed", "retried"} {
		j, err := q.TryClaim(ctx)
		if err != nil || string(j.Payload()) != want {
			t.Fatalf("claimed %v, %v; want %q", j, err, want)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQueueAnnouncesToWaiters: a Put announces itself on the queue's
// channel only while a claimant may wait there, and then wakes it at once
// (its renewal period, after which it would look anyway, is long).
func TestQueueAnnouncesToWaiters(t *testing.T) {
	s := startRedis(t)
	b := open(t, s.URL("ttl=60s"))
	q := queue(t, b, "announced")
	ctx := context.Background()
	sub := s.Client().Subscribe(ctx, DefaultPrefix+"jobs:{announced}:wake")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	mustPut(t, q, "unwatched")
	select {
	case m := <-sub.Channel():
		t.Fatalf("a Put no claimant waited for announced itself: %v", m)
	case <-time.After(200 * time.Millisecond):
	}
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Client().ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got := make(chan *baton.Job, 1)
	go func() {
		j, err := queue(t, b, "announced").Claim(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	// The claimant waits once it has run the claim script twice.
	for commandCalls(t, s.Client())["evalsha"] < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	t0 := time.Now()
	mustPut(t, q, "watched")
	select {
	case j := <-got:
		if j == nil || string(j.Payload()) != "watched" {
			t.Fatalf("the waiting claimant got %v", j)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("woken after %v", time.Since(t0))
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting claimant was not woken by the Put")
	}
}
