package recipecheck

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/recipe/recipetest"
)

// Leases of 2 s keep the failover tests short and survive a loaded -race
// run.
const ttl = 2 * time.Second

var (
	redisSuite = recipetest.Suite{Name: "redis", Open: openRedis, Lease: true, Failover: ttl + time.Second, LossBound: 10 * time.Second}
	etcdSuite  = recipetest.Suite{Name: "etcd", Open: openEtcd, Lease: true, Failover: ttl + time.Second, LossBound: 10 * time.Second}
)

func openRedis(url string) (baton.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return redislock.OpenURL(ctx, url, lease.WithTTL(ttl))
}

func openEtcd(url string) (baton.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return etcdlock.OpenURL(ctx, url, lease.WithTTL(ttl))
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(envEtcd); dir != "" {
		os.Exit(serveEtcd(dir))
	}
	recipetest.Main(m, redisSuite, etcdSuite, pgSuite, zkSuite, mysqlSuite)
}
