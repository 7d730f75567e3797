package recipe_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/recipe"
)

// The cost of one Allow of a limit shared on the same host, kept in the
// backend's Value (the Backend hidden behind its interface, without its
// own store) and in local.OpenRateStore's word, beside
// golang.org/x/time/rate's in-process limiter of the same rate and burst
// (go test -bench RateAllow ./recipe).

var benchLimit = recipe.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1000}

func BenchmarkRateAllowLocal(b *testing.B) {
	be, err := local.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	r, err := recipe.NewRateLimiter(context.Background(), struct{ baton.Backend }{be}, "bench", benchLimit)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for b.Loop() {
		if _, err := r.Allow(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRateAllowLocalWord(b *testing.B) {
	s, err := local.OpenRateStore(b.TempDir(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	r, err := recipe.NewRateLimiterOn(context.Background(), "bench", s, benchLimit)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for b.Loop() {
		if _, err := r.Allow(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRateAllowXTimeRate(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(benchLimit.Rate), int(benchLimit.Burst))
	for b.Loop() {
		l.Allow()
	}
}
