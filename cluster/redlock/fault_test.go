package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/internal/redistest"
)

func TestRedlockMinorityDown(t *testing.T) {
	var ss []*redistest.Server
	for range 5 {
		ss = append(ss, redistest.Start(t))
	}
	b := open(t, redlockURL(ss, "ttl=2s"))
	m := mutex(t, b, "quorum")
	ss[0].Kill()
	ss[1].Kill()
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := m.Lock(ctx); err != nil {
			cancel()
			t.Fatalf("Lock with 3 of 5 nodes up: %v", err)
		}
		if err := m.Unlock(ctx); err != nil {
			cancel()
			t.Fatalf("Unlock with 3 of 5 nodes up: %v", err)
		}
		cancel()
	}
	ss[2].Kill()
	if _, err := m.TryLock(context.Background()); err == nil || errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock with 2 of 5 nodes up: %v, want a no-majority error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := m.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with 2 of 5 nodes up: %v, want DeadlineExceeded", err)
	}
}

// TestRedlockReleaseAnnounced checks that a Redlock release is published
// on the release channel when, and only when, a waiter has marked the name
// as awaited, and that a waiter in another client takes the lock on that
// message instead of its fallback timer.
func TestRedlockReleaseAnnounced(t *testing.T) {
	ss := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	url := redlockURL(ss, "ttl=10s")
	holder := mutex(t, open(t, url), "announce")
	ctx := context.Background()
	sub := ss[0].Client().Subscribe(ctx, DefaultPrefix+"redlock:released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()

	// quiet drains the messages until none came for d.
	quiet := func(d time.Duration) {
		for {
			select {
			case <-msgs:
			case <-time.After(d):
				return
			}
		}
	}
	lockKey := redisnode.KeyBase(DefaultPrefix, keyKind, "announce") + "lock"

	// Nobody waits, and a refused TryLock does not wait either: no message.
	// (A Lock right after an Unlock may find a node whose release is still
	// on its way, and then marks the name as awaited there; that Lock is
	// followed by quiet below, and the checked Lock finds every node free.)
	for range 3 {
		if _, err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	quiet(300 * time.Millisecond)
	if _, err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		for i, s := range ss {
			if s.Client().Exists(ctx, lockKey).Val() != 1 {
				return fmt.Errorf("node %d does not have the hold", i)
			}
		}
		return nil
	})
	other := mutex(t, open(t, url), "announce")
	if _, err := other.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock beside a holder: %v, want ErrLocked", err)
	}
	quiet(100 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		t.Fatalf("release with nobody waiting was announced: %v", m)
	case <-time.After(200 * time.Millisecond):
	}

	// A waiter in another client: the release is announced, and the waiter
	// holds the lock well before its 100 ms fallback would have let it try
	// again, in each of several rounds.
	for round := range 5 {
		if _, err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			if _, err := other.Lock(ctx); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		// Let the waiter be refused and fall asleep.
		flag := redisnode.KeyBase(DefaultPrefix, keyKind, "announce") + "waiting"
		eventually(t, func() error {
			if ss[0].Client().Exists(ctx, flag).Val() != 1 {
				return errors.New("the waiter never marked the name as awaited")
			}
			return nil
		})
		time.Sleep(20 * time.Millisecond)
		released := time.Now()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-msgs:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: release with a waiter was not announced", round)
		}
		took := (<-got).Sub(released)
		if err := other.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if took < 60*time.Millisecond {
			return
		}
		t.Logf("round %d: waiter took %v after the release", round, took)
	}
	t.Fatal("the waiter never took the lock on the release message in 5 rounds")
}
