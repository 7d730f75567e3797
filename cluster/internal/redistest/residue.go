package redistest

import (
	"context"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Residue counts the keys under prefix on every node of the URL cfg (its
// hosts, comma-separated: a single node, the masters of a Cluster, or the
// nodes of Redlock), leaving out the readiness markers (prefix + "alive",
// prefix + "alive:{tag}"), which are one per node or hash slot whatever the
// names used.
func Residue(cfg, prefix string) (int, error) {
	u, err := url.Parse(cfg)
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	n := 0
	for _, addr := range strings.Split(u.Host, ",") {
		c := redis.NewClient(&redis.Options{Addr: addr})
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			k := strings.TrimPrefix(iter.Val(), prefix)
			if k != "alive" && !strings.HasPrefix(k, "alive:") {
				n++
			}
		}
		err := iter.Err()
		c.Close()
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}
