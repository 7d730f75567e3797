package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

func TestRateStoreNew(t *testing.T) {
	if _, err := NewRateStore(nil, "k"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("NewRateStore(nil): %v", err)
	}
	s := startRedis(t)
	if _, err := NewRateStore(s.Client(), ""); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("NewRateStore with an empty key: %v", err)
	}
	// The hash of another kind of key is reported, not misread.
	c := s.Client()
	ctx := context.Background()
	c.Set(ctx, "str", "x", 0)
	rs, err := NewRateStore(c, "str")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recipe.NewRateLimiterOn(ctx, "str", rs, recipe.Limit{Rate: 1, Period: time.Second, Burst: 1}); err == nil {
		t.Errorf("a limit on a string key opened")
	}
}

// Allow of a limit on Redis, contended: one script (RateStore), or kept in
// the backend's Value (a Load and a CompareAndSwap again after each
// conflict).
func BenchmarkRateAllow(b *testing.B) {
	s := startRedis(b)
	ctx := context.Background()
	lim := recipe.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1000}
	bench := func(b *testing.B, r *recipe.RateLimiter, err error) {
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		// Eight goroutines per CPU on one handle: contended, as a shared
		// limit is.
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := r.Allow(ctx, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("script", func(b *testing.B) {
		rs, err := NewRateStore(s.Client(), "bench:rate")
		if err != nil {
			b.Fatal(err)
		}
		r, err := recipe.NewRateLimiterOn(ctx, "bench", rs, lim)
		bench(b, r, err)
	})
	b.Run("value", func(b *testing.B) {
		r, err := recipe.NewRateLimiter(ctx, benchBackend(b, s.URL("")), "bench", lim)
		bench(b, r, err)
	})
}
