package pglock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
)

// The leases of these tests are long, so that the listener's backstop (a
// renewal period) cannot pass for a notification.
func openWakeQueue(t *testing.T, name string) baton.Queue {
	t.Helper()
	_, q := openQueueTTL(t, name, 60*time.Second)
	return q
}

// TestQueueNotifiesWaitersOnly: Puts to a queue nobody waits on send no
// notification; a Put to a queue with a waiting claimant wakes it, and
// the claimant counts itself off when it returns.
func TestQueueNotifiesWaitersOnly(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprint("wake-", time.Now().UnixNano())
	q := openWakeQueue(t, name)
	l, err := pgx.Connect(ctx, need(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if _, err := l.Exec(ctx, "LISTEN "+pgx.Identifier{DefaultPrefix + channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	notified := func(within time.Duration) int {
		n := 0
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		for {
			m, err := l.WaitForNotification(wctx)
			if err != nil {
				return n
			}
			if m.Payload == "q/"+name {
				n++
			}
		}
	}
	for range 20 {
		if _, err := q.Put(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if n := notified(300 * time.Millisecond); n != 0 {
		t.Fatalf("20 Puts with no claimant waiting sent %d notifications, want 0", n)
	}
	for range 20 {
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waiting := func() int {
		var w int
		if err := l.QueryRow(ctx, "SELECT waiting FROM "+DefaultPrefix+"queues WHERE queue = $1", name).Scan(&w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	got := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		j, err := q.Claim(cctx)
		if err == nil {
			err = j.Ack(ctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); waiting() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the blocked claimant did not count itself waiting")
		}
	}
	t0 := time.Now()
	if _, err := q.Put(ctx, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiting claimant: %v", err)
	}
	if el := time.Since(t0); el > 5*time.Second {
		t.Errorf("the waiting claimant took %v to wake", el)
	}
	if n := notified(time.Second); n != 1 {
		t.Errorf("a Put to a queue with a waiting claimant sent %d notifications, want 1", n)
	}
	if w := waiting(); w != 0 {
		t.Errorf("waiting = %d after the claimant returned, want 0", w)
	}
}

// TestQueueWakeRace: a Put at a random moment around a claimant's going
// to sleep always wakes it (a lost notification would leave it asleep
// until the backstop, far past each round's limit).
func TestQueueWakeRace(t *testing.T) {
	ctx := context.Background()
	q := openWakeQueue(t, fmt.Sprint("wake-race-", time.Now().UnixNano()))
	for round := range 100 {
		got := make(chan error, 1)
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			j, err := q.Claim(cctx)
			if err == nil {
				err = j.Ack(ctx)
			}
			got <- err
		}()
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		if _, err := q.Put(ctx, []byte("job")); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
