package redislock

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// startCluster builds a Redis Cluster of n masters without replicas.
func startCluster(t testing.TB, n int) []*server {
	t.Helper()
	var ss []*server
	var addrs []string
	for range n {
		s := redistest.New(t)
		s.Args = []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"),
			"--cluster-node-timeout", "2000"}
		s.Start()
		t.Cleanup(s.Kill)
		ss = append(ss, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range ss {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				c.Close()
				t.Fatalf("cluster did not become ok: %v %q", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	// Mark every slot, as markNew does for a single server.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	if _, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, tag := range slotTags() {
			p.Set(ctx, DefaultPrefix+"alive:{"+tag+"}", "new", 0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ss
}

func clusterURL(ss []*server, query string) string { return redistest.URL("redis+cluster", ss, query) }

type server = redistest.Server

func startRedis(t testing.TB, extra ...string) *server { return redistest.Start(t, extra...) }
