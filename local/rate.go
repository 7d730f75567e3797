package local

import (
	"context"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local/shmrate"
	"github.com/batonlock/baton/recipe"
)

// OpenRateStore opens the rate limit name of the namespace directory dir
// ("" for the default) as a recipe.RateStore kept in one lock-free word of
// shared memory (package shmrate), for recipe.NewRateLimiterOn:
//
//	s, err := local.OpenRateStore("", "api")
//	lim, err := recipe.NewRateLimiterOn(ctx, "api", s, recipe.Limit{Rate: 100, Period: time.Second, Burst: 20})
//
// recipe.NewRateLimiter on a Backend of this package opens the same store
// (the Backend's OpenRate): the two share the limit of a name in one
// namespace.
func OpenRateStore(dir, name string) (recipe.RateStore, error) {
	if err := baton.ValidateName(name); err != nil {
		return nil, fmt.Errorf("local: rate limit: %w", err)
	}
	if err := ipc.CheckEncodedLen(name); err != nil {
		return nil, fmt.Errorf("local: rate limit: %w", err)
	}
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return nil, err
	}
	s, err := shmrate.OpenEntry(ns.Resolve(shmrate.Kind, name))
	if err != nil {
		return nil, fmt.Errorf("local: rate limit %q: %w", name, err)
	}
	return s, nil
}

var _ driver.RateOpener = (*backend)(nil)

// OpenRate serves recipe.NewRateLimiter with the word of name
// (driver.RateOpener).
func (d *backend) OpenRate(ctx context.Context, name string) (driver.Rate, error) {
	s, err := shmrate.OpenEntry(d.ns.Resolve(shmrate.Kind, name))
	if err != nil {
		return nil, err
	}
	return recipe.DriverRate(s), nil
}
