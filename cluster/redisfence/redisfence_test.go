package redisfence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/cluster/redisfence"
	"github.com/batonlock/baton/fence"
)

func newFence(t *testing.T, c redis.Scripter, key string) *redisfence.Fence {
	t.Helper()
	f, err := redisfence.New(c, key)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFencedWrites(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t).Client()
	f := newFence(t, c, "res:fence")
	if _, err := redisfence.New(nil, "k"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
	if err := f.Set(ctx, 0, "res", "x", 0); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Set with token 0: %v", err)
	}
	if _, err := f.HSet(ctx, 3, "h", "odd"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("HSet with a field and no value: %v", err)
	}
	if h, err := f.Highest(ctx); h != 0 || err != nil {
		t.Fatalf("Highest before any write: %d, %v", h, err)
	}
	if err := f.Set(ctx, 5, "res", "five", 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, 5, "res", "five again", time.Minute); err != nil {
		t.Errorf("the same holder writing twice: %v", err)
	}
	if ttl := c.PTTL(ctx, "res").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("Set with an expiration: PTTL %v", ttl)
	}
	err := f.Set(ctx, 4, "res", "stale", 0)
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.Is(err, baton.ErrLost) || !errors.As(err, &se) ||
		se.Token != 4 || se.Highest != 5 {
		t.Errorf("Set with 4 after 5: %v, want StaleError{4, 5}", err)
	}
	if v := c.Get(ctx, "res").Val(); v != "five again" {
		t.Errorf("res = %q after a stale write", v)
	}
	if n, err := f.HSet(ctx, 6, "h", "a", "1", "b", "2"); n != 2 || err != nil {
		t.Errorf("HSet: %d, %v", n, err)
	}
	if _, err := f.HSet(ctx, 5, "h", "a", "stale"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("HSet with 5 after 6: %v", err)
	}
	if v := c.HGet(ctx, "h", "a").Val(); v != "1" {
		t.Errorf("h.a = %q after a stale HSet", v)
	}
	if v, err := f.Do(ctx, 7, "INCRBY", "n", 40); v != int64(40) || err != nil {
		t.Errorf("Do INCRBY: %v, %v", v, err)
	}
	if v, err := f.Do(ctx, 7, "GETDEL", "missing"); v != nil || err != nil {
		t.Errorf("Do with a nil reply: %v, %v", v, err)
	}
	// A command that fails leaves the fence as it was.
	if _, err := f.Do(ctx, 8, "HSET", "res", "f", "v"); err == nil {
		t.Errorf("HSET on a string key succeeded")
	}
	if h, err := f.Highest(ctx); h != 7 || err != nil {
		t.Errorf("Highest after a failed command with 8: %d, %v; want 7", h, err)
	}
}

// TestLargeTokens: tokens differ past the 53 bits a double holds exactly
// (ZooKeeper's zxid<<4 and etcd's revision<<4 grow there).
func TestLargeTokens(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t).Client()
	f := newFence(t, c, "big:fence")
	for _, tok := range []baton.Token{1<<53 + 2, 1<<63 + 1, 1<<64 - 2} {
		if err := f.Set(ctx, tok, "big", strconv.FormatUint(uint64(tok), 10), 0); err != nil {
			t.Fatalf("Set(%d): %v", tok, err)
		}
		if err := f.Set(ctx, tok-1, "big", "stale", 0); !errors.Is(err, fence.ErrStale) {
			t.Errorf("Set(%d) after %d: %v, want ErrStale", tok-1, tok, err)
		}
	}
	if err := f.Set(ctx, 1<<64-1, "big", "last", 0); err != nil {
		t.Errorf("Set(2^64-1): %v", err)
	}
	if h, err := f.Highest(ctx); h != 1<<64-1 || err != nil {
		t.Errorf("Highest %d, %v", h, err)
	}
	// Keys of other lengths compare as numbers, not as strings.
	g := newFence(t, c, "len:fence")
	for _, tok := range []baton.Token{9, 10, 99, 100} {
		if err := g.Set(ctx, tok, "len", "v", 0); err != nil {
			t.Fatalf("Set(%d): %v", tok, err)
		}
	}
	if err := g.Set(ctx, 99, "len", "stale", 0); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Set(99) after 100: %v", err)
	}
}

// TestHammer: goroutines on two clients append their tokens to a list
// through one fence, with tokens that other goroutines sometimes
// overtake; the list must come out in non-decreasing order and hold
// exactly the accepted writes.
func TestHammer(t *testing.T) {
	const goroutines, per = 8, 150
	ctx := context.Background()
	s := redistest.Start(t)
	clients := []*redis.Client{s.Client(), s.Client()}
	var next atomic.Int64
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range goroutines {
		f := newFence(t, clients[i%2], "log:fence")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				n := next.Add(1)
				if rand.IntN(3) == 0 {
					n -= int64(rand.IntN(goroutines))
				}
				tok := baton.Token(max(1, n))
				_, err := f.Do(ctx, tok, "RPUSH", "log", uint64(tok))
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, fence.ErrStale):
					refused.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	log, err := clients[0].LRange(ctx, "log", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(log)) != accepted.Load() {
		t.Errorf("%d entries, %d accepted writes", len(log), accepted.Load())
	}
	var last uint64
	for i, e := range log {
		v, _ := strconv.ParseUint(e, 10, 64)
		if v < last {
			t.Fatalf("entry %d has token %d after %d", i, v, last)
		}
		last = v
	}
	if refused.Load() == 0 {
		t.Errorf("no write was refused: the test did not exercise stale tokens")
	}
	t.Logf("%d accepted, %d refused", accepted.Load(), refused.Load())
}
