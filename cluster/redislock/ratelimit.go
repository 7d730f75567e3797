package redislock

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/recipe"
)

var scriptRateStep = loadScript("rate_step")

// RateStore is the state of one rate limit of package recipe kept in a
// hash at a key of a Redis server (recipe.NewRateLimiter on a Backend of
// this package uses one), each step one script (rate_step.lua)
// on the server's clock: one round trip, whatever the contention, where
// the limit kept in a Value reads and compares-and-swaps. Open it with
// recipe.NewRateLimiterOn:
//
//	s, err := redislock.NewRateStore(client, "baton:rate:api")
//	lim, err := recipe.NewRateLimiterOn(ctx, "api", s, recipe.Limit{Rate: 100, Period: time.Second, Burst: 20})
//
// The key has no expiry: the limit's parameters stay with it. On Redis
// Cluster it is one key, so any slot serves it.
type RateStore struct {
	c   redis.Scripter
	key string
	// args is the script's arguments of the last limit stepped, boxed
	// once: a limit's steps all carry the same parameters.
	args atomic.Pointer[rateArgs]
}

// rateArgs is a limit and its script arguments.
type rateArgs struct {
	lim                     recipe.Limit
	rate, period, burst, iv any
}

// NewRateStore returns the store at key on c (a *redis.Client,
// *redis.ClusterClient or *redis.Ring). It makes no request; Close leaves
// the client open.
func NewRateStore(c redis.Scripter, key string) (*RateStore, error) {
	if c == nil || key == "" {
		return nil, fmt.Errorf("%w: redislock: rate store: nil client or empty key", baton.ErrInvalidArgument)
	}
	return &RateStore{c: c, key: key}, nil
}

// krate is the kind part of the key of a rate limit that NewRateLimiter
// keeps with the Backend (OpenRate).
const krate = "rate"

var _ driver.RateOpener = (*backend)(nil)

// OpenRate serves recipe.NewRateLimiter with the RateStore of name, at a
// key of its own beside the name's other keys (one hash slot on a Redis
// Cluster), under the Backend's prefix.
func (d *backend) OpenRate(ctx context.Context, name string) (driver.Rate, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return recipe.DriverRate(&RateStore{c: d.c, key: redisnode.KeyBase(d.o.Prefix, krate, name) + "hash"}), nil
}

// Close does nothing: the client is the caller's.
func (s *RateStore) Close() error { return nil }

// Step runs one step of the limit (see recipe.RateStore).
func (s *RateStore) Step(ctx context.Context, op recipe.RateOp, lim recipe.Limit, n int64, at time.Time) (recipe.RateOutcome, error) {
	var atUs int64
	if !at.IsZero() {
		atUs = at.UnixMicro()
	}
	a := s.args.Load()
	if a == nil || a.lim != lim {
		a = &rateArgs{lim: lim, rate: lim.Rate, period: int64(lim.Period), burst: lim.Burst, iv: lim.Interval().Microseconds()}
		s.args.Store(a)
	}
	r, err := scriptRateStep.Run(ctx, s.c, []string{s.key}, int(op), a.rate, a.period, a.burst, a.iv, n, atUs).Slice()
	if err != nil {
		return recipe.RateOutcome{}, err
	}
	num := func(i int) int64 {
		if i >= len(r) {
			return -1
		}
		switch v := r[i].(type) {
		case int64:
			return v
		case string:
			if x, err := strconv.ParseInt(v, 10, 64); err == nil {
				return x
			}
		}
		return -1
	}
	if num(0) == 0 {
		have := recipe.Limit{Rate: num(1), Period: time.Duration(num(2)), Burst: num(3)}
		return recipe.RateOutcome{}, recipe.RateMismatch(have, lim)
	}
	if len(r) != 5 || num(2) < 0 || num(3) < 0 || num(4) < 0 {
		return recipe.RateOutcome{}, fmt.Errorf("redislock: rate_step replied %v", r)
	}
	return recipe.RateOutcome{
		Allowed:   num(1) == 1,
		Wait:      time.Duration(num(2)) * time.Microsecond,
		Remaining: num(3),
		Now:       time.UnixMicro(num(4)),
	}, nil
}
