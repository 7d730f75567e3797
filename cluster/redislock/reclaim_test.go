package redislock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestCounterAheadOfClock: a name taken faster than the server clock
// advances has a token counter ahead of the clock; its key must outlive
// the instant the clock passes the last token (reserved ones included), so
// that a counter started again from the clock is above it. The counter is
// set ahead by hand here, as a burst of acquisitions would leave it.
func TestCounterAheadOfClock(t *testing.T) {
	s := startRedis(t)
	b := open(t, s.URL("ttl=2s"))
	c := s.Client()
	ctx := context.Background()
	const ahead = int64(10 * time.Second / time.Microsecond)
	for _, tc := range []struct {
		kind    string
		counter string
		lock    func(name string) baton.Token
		reserve int64 // tokens above the hold's that its backend may give
	}{
		{kmutex, mutexKeys(DefaultPrefix, "ahead-m")[1], func(name string) baton.Token {
			m := mutex(t, b, name)
			h, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			return h.Token()
		}, passTokens},
		{krw, lockKeys(DefaultPrefix, krw, "ahead-rw")[5], func(name string) baton.Token {
			m := rwmutex(t, b, name)
			h, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			return h.Token()
		}, 0},
	} {
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		start := now.UnixMicro() + ahead
		if err := c.Set(ctx, tc.counter, strconv.FormatInt(start, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
		name := "ahead-m"
		if tc.kind == krw {
			name = "ahead-rw"
		}
		tok := int64(tc.lock(name))
		if tok <= start {
			t.Fatalf("%s: token %d, not above the counter %d", tc.kind, tok, start)
		}
		at, err := c.PExpireTime(ctx, tc.counter).Result()
		if err != nil {
			t.Fatal(err)
		}
		// The key goes when the server clock (ms) is past the last token
		// (µs) by a TTL; a counter started again then starts above it.
		want := time.UnixMicro(tok + tc.reserve).Add(2 * time.Second)
		if at < time.Duration(want.UnixMilli())*time.Millisecond {
			t.Errorf("%s: counter %d expires at %v, before the clock passes its last token plus a TTL (%v)",
				tc.kind, tok, time.UnixMilli(at.Milliseconds()), want)
		}
	}
}

// TestIdleSemaphoreLeavesNoKey: a semaphore's capacity goes with its last
// hold, and a handle opened later may store another capacity.
func TestIdleSemaphoreLeavesNoKey(t *testing.T) {
	s := startRedis(t)
	b := open(t, s.URL("ttl=2s"))
	ctx := context.Background()
	sem, err := b.Semaphore(ctx, "cap", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := sem.Close(); err != nil {
		t.Fatal(err)
	}
	capKey := semKeys(DefaultPrefix, "cap")[5]
	eventually(t, func() error {
		if n := s.Client().Exists(ctx, capKey).Val(); n != 0 {
			return errorString("the capacity key is still there")
		}
		return nil
	})
	sem, err = b.Semaphore(ctx, "cap", 3)
	if err != nil {
		t.Fatalf("Semaphore of another capacity after the first went idle: %v", err)
	}
	if _, err := sem.Acquire(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := sem.Close(); err != nil {
		t.Fatal(err)
	}
}
