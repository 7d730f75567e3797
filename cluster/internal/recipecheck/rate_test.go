package recipecheck

import (
	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/recipe"
)

// The Redis suite runs the rate limiter's tests on redislock's RateStore
// (one script) too.
func init() { redisSuite.RateStore = openRedisRate }

// clientRateStore closes its client with the store.
type clientRateStore struct {
	*redislock.RateStore
	c *redis.Client
}

func (s clientRateStore) Close() error { return s.c.Close() }

func openRedisRate(url, name string) (recipe.RateStore, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	s, err := redislock.NewRateStore(c, "baton:rate:"+name)
	if err != nil {
		c.Close()
		return nil, err
	}
	return clientRateStore{s, c}, nil
}
