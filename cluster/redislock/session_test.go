package redislock

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// killSession closes every client connection of the servers of cfg, the
// holder's included, as CLIENT KILL by an operator does. A hold is its
// keys, not a connection: it survives, renewed on a new connection.
func killSession(cfg, _ string) (bool, error) {
	u, err := url.Parse(cfg)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	killed := 0
	for _, addr := range strings.Split(u.Host, ",") {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for _, typ := range []string{"normal", "pubsub"} {
			var n int
			if n, err = c.Do(ctx, "CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes").Int(); err != nil {
				break
			}
			killed += n
		}
		c.Close()
		if err != nil {
			return false, err
		}
	}
	if killed == 0 {
		return false, fmt.Errorf("no client connection to %s", u.Host)
	}
	return true, nil
}
