//go:build linux

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton/recipe"
)

// The Redis rate table: baton's Allow on a redis Backend (recipe's
// NewRateLimiter, which keeps the limit in redislock's one-script store)
// beside a floor of one call of a minimal GCRA script, the work a
// script-based limiter does per Allow: one EVALSHA, the server's clock,
// the arrival time in a string key with an expiry, no parameters kept.

const rawGCRA = "raw GCRA script"

var scriptRawGCRA = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, tau = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local nt = tat + interval
if nt - tau > now then return {0, 0, nt - tau - now} end
redis.call('SET', KEYS[1], nt, 'PX', math.floor((nt - now) / 1000) + 1)
return {1, math.floor((now + tau - nt) / interval), 0}
`)

func redisRateTables(cfg config, ce *clusterEnv, extra func() time.Duration) []*plannedTable {
	if len(ce.redis) == 0 {
		return nil
	}
	env := &redisQueueEnv{addr: ce.redis[0].addr}
	bs := &subject{name: "baton redis", id: "bredisrate", baton: true, kind: "redis"}
	raw := &subject{name: rawGCRA, id: "rawgcra", kind: "redis"}
	interval := rateLimit.Interval().Microseconds()
	tau := interval * rateLimit.Burst
	t := newPlanned("redis-rate-allow", "Redis", "Redis rate limit, Allow(1) of one caller", "throughput", "",
		[]string{rawGCRA}, []*subject{bs, raw},
		func(ctx context.Context, s *subject) (sample, error) {
			c, b, err := env.open()
			if err != nil {
				return sample{}, err
			}
			nop := func(context.Context) error { return nil }
			var o op
			if s == raw {
				o = op{take: func(ctx context.Context) error {
					r, err := scriptRawGCRA.Run(ctx, c, []string{"rawrate:bench"}, interval, tau).Int64Slice()
					if err == nil && len(r) != 3 {
						err = fmt.Errorf("raw GCRA replied %v", r)
					}
					return err
				}, give: nop, close: func() error { return nil }}
			} else {
				r, err := recipe.NewRateLimiter(ctx, b, "bench-rate", rateLimit)
				if err != nil {
					return sample{}, err
				}
				o = op{take: func(ctx context.Context) error { _, err := r.Allow(ctx, 1); return err }, give: nop, close: r.Close}
			}
			defer o.close()
			if err := warmUp(ctx, []op{o}); err != nil {
				return sample{}, err
			}
			return uncontended(ctx, o, cfg.dur, extra)
		}).twin(rawGCRA)
	t.done = env.close
	return []*plannedTable{t}
}
