//go:build linux

package main

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/recipe"
)

// rateLimit is the limit of the rate tables: a rate far beyond what one
// caller asks, so that Allow mostly admits after the burst too.
var rateLimit = recipe.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1000}

// rateTables measure one Allow of a rate limit shared on the same host, in
// shared memory's lock-free word and in the name's Value, beside
// golang.org/x/time/rate's in-process limiter of the same rate and burst.
func rateTables(cfg config, he *hostEnv) []*plannedTable {
	const sec = "Same host"
	mk := func(id, name string, isBaton bool) *subject {
		return &subject{name: name, id: id, baton: isBaton, kind: "same-host"}
	}
	subs := []*subject{mk("word", "baton local rate limit (word)", true), mk("value", "baton rate limit over a local Value", true),
		mk("xrate", "x/time/rate", false)}
	return []*plannedTable{newPlanned("rate-allow", sec, "Rate limit, Allow(1) of one caller", "throughput", "",
		[]string{"x/time/rate"}, subs, func(ctx context.Context, s *subject) (sample, error) {
			o, err := rateOp(ctx, s.id, he)
			if err != nil {
				return sample{}, err
			}
			defer o.close()
			return uncontended(ctx, o, cfg.dur, nil)
		})}
}

// rateOp is an Allow of the subject id as the take of an op.
func rateOp(ctx context.Context, id string, he *hostEnv) (op, error) {
	nop := func(context.Context) error { return nil }
	if id == "xrate" {
		l := rate.NewLimiter(rate.Limit(rateLimit.Rate), int(rateLimit.Burst))
		return op{take: func(context.Context) error { l.Allow(); return nil }, give: nop, close: func() error { return nil }}, nil
	}
	var r *recipe.RateLimiter
	var err error
	if id == "word" {
		var s recipe.RateStore
		if s, err = local.OpenRateStore(he.dir, "bench-rate"); err != nil {
			return op{}, err
		}
		r, err = recipe.NewRateLimiterOn(ctx, "bench-rate", s, rateLimit)
	} else {
		// Behind its interface the Backend shows no store of its own
		// (driver.RateOpener): the limit is kept in the Value.
		r, err = recipe.NewRateLimiter(ctx, struct{ baton.Backend }{he.fastB}, "bench-rate", rateLimit)
	}
	if err != nil {
		return op{}, err
	}
	allow := func(ctx context.Context) error { _, err := r.Allow(ctx, 1); return err }
	return op{take: allow, give: nop, close: r.Close}, nil
}
