package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
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
// conflict; the Backend is hidden behind its interface, without its own
// store).
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
		r, err := recipe.NewRateLimiter(ctx, struct{ baton.Backend }{benchBackend(b, s.URL(""))}, "bench", lim)
		bench(b, r, err)
	})
}

// NewRateLimiter on a Backend of this package keeps the limit in one
// script's hash (the Backend's driver.RateOpener), on a single node and on
// a Cluster, not in the Value of the name; a second process's handle
// shares it and refuses other parameters.
func TestRateLimiterBackendScript(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		s := startRedis(t)
		testRateLimiterBackend(t, s.URL(""), s.Client())
	})
	t.Run("cluster", func(t *testing.T) {
		ss := startCluster(t, 3)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{ss[0].Addr()}})
		t.Cleanup(func() { c.Close() })
		testRateLimiterBackend(t, clusterURL(ss, ""), c)
	})
}

func testRateLimiterBackend(t *testing.T, url string, c redis.UniversalClient) {
	ctx := context.Background()
	open := func() baton.Backend {
		b, err := OpenURL(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1, b2 := open(), open()
	lim := recipe.Limit{Rate: 1, Period: time.Hour, Burst: 3}
	r1, err := recipe.NewRateLimiter(ctx, b1, "api", lim)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	if res, err := r1.Allow(ctx, 3); err != nil || !res.Allowed {
		t.Fatalf("Allow(burst) = %+v, %v", res, err)
	}
	r2, err := recipe.NewRateLimiter(ctx, b2, "api", lim)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if res, err := r2.Allow(ctx, 1); err != nil || res.Allowed {
		t.Errorf("a second Backend's handle admitted an event after the burst was taken: %+v, %v", res, err)
	}
	if _, err := recipe.NewRateLimiter(ctx, b2, "api", recipe.Limit{Rate: 2, Period: time.Hour, Burst: 3}); !errors.Is(err, baton.ErrMismatch) {
		t.Errorf("the limit opened with other parameters: %v", err)
	}
	key := redisnode.KeyBase(DefaultPrefix, krate, "api") + "hash"
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Errorf("no script hash at %s: %d, %v", key, n, err)
	}
	v, err := b1.Value(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, ver, err := v.Load(ctx); err != nil || ver != 0 {
		t.Errorf("the Value of the name was written: version %d, %v", ver, err)
	}
}
