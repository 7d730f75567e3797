package recipe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/recipe"
)

// NewRateLimiter on a local Backend keeps the limit in the word of shared
// memory that local.OpenRateStore opens (the backend's driver.RateOpener),
// not in the Value of the name, and its handle closes with the Backend.
func TestRateLimiterLocalWord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	be, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	lim := recipe.Limit{Rate: 1, Period: time.Hour, Burst: 3}
	r, err := recipe.NewRateLimiter(ctx, be, "api", lim)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if res, err := r.Allow(ctx, 3); err != nil || !res.Allowed {
		t.Fatalf("Allow(burst) = %+v, %v", res, err)
	}
	s, err := local.OpenRateStore(dir, "api")
	if err != nil {
		t.Fatal(err)
	}
	w, err := recipe.NewRateLimiterOn(ctx, "api", s, lim)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if res, err := w.Allow(ctx, 1); err != nil || res.Allowed {
		t.Errorf("the word admitted an event after NewRateLimiter took the burst: %+v, %v", res, err)
	}
	if _, err := recipe.NewRateLimiterOn(ctx, "api", mustStore(t, dir), recipe.Limit{Rate: 2, Period: time.Hour, Burst: 3}); !errors.Is(err, baton.ErrMismatch) {
		t.Errorf("the word opened with other parameters: %v", err)
	}
	v, err := be.Value(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, ver, err := v.Load(ctx); err != nil || ver != 0 {
		t.Errorf("the Value of the name was written: version %d, %v", ver, err)
	}
	// A Backend without a store of its own keeps the limit in the Value.
	vr, err := recipe.NewRateLimiter(ctx, struct{ baton.Backend }{be}, "api", recipe.Limit{Rate: 2, Period: time.Hour, Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer vr.Close()
	if _, ver, err := v.Load(ctx); err != nil || ver == 0 {
		t.Errorf("a limit over the Value wrote no version: %v", err)
	}
	be.Close()
	if _, err := r.Allow(ctx, 1); !errors.Is(err, baton.ErrClosed) {
		t.Errorf("Allow after the Backend closed: %v", err)
	}
}

func mustStore(t *testing.T, dir string) recipe.RateStore {
	s, err := local.OpenRateStore(dir, "api")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The core validates a name and refuses a closed Backend before the
// backend's store is opened.
func TestRateLimiterLocalWordRefused(t *testing.T) {
	ctx := context.Background()
	be, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lim := recipe.Limit{Rate: 1, Period: time.Second, Burst: 1}
	if _, err := recipe.NewRateLimiter(ctx, be, "a//b", lim); !errors.Is(err, baton.ErrInvalidName) {
		t.Errorf("a bad name: %v", err)
	}
	be.Close()
	if _, err := recipe.NewRateLimiter(ctx, be, "api", lim); !errors.Is(err, baton.ErrClosed) {
		t.Errorf("a closed Backend: %v", err)
	}
}
