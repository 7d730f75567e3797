package redisfence_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/cluster/redisfence"
	"github.com/batonlock/baton/fence"
)

// TestCluster: on Redis Cluster a fence key and the keys it guards that
// share a hash tag are written by the script on their one node; keys of
// other slots are refused by the server.
func TestCluster(t *testing.T) {
	redistest.Need(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-cli not on PATH (CI): %v", err)
		}
		t.Skipf("redis-cli not on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for range 3 {
		s := redistest.New(t)
		s.Args = []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.Dir, "nodes.conf")}
		s.Start()
		t.Cleanup(s.Kill)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	if out, err := exec.CommandContext(ctx, "redis-cli", append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				return n.Ping(ctx).Err()
			}); err == nil {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster not ok: %v %q", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, tag := range []string{"orders", "users", "jobs"} {
		f, err := redisfence.New(c, "{"+tag+"}:fence")
		if err != nil {
			t.Fatal(err)
		}
		var werr error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			// The first writes may meet a node that does not know the
			// slot map yet.
			if werr = f.Set(ctx, 10, "{"+tag+"}:total", "ten", 0); werr == nil {
				break
			}
		}
		if werr != nil {
			t.Fatalf("%s: Set: %v", tag, werr)
		}
		if err := f.Set(ctx, 9, "{"+tag+"}:total", "nine", 0); !errors.Is(err, fence.ErrStale) {
			t.Errorf("%s: Set with a lower token: %v", tag, err)
		}
		if v := c.Get(ctx, "{"+tag+"}:total").Val(); v != "ten" {
			t.Errorf("%s: value %q", tag, v)
		}
	}
	f, _ := redisfence.New(c, "{orders}:fence")
	if err := f.Set(ctx, 11, "{users}:total", "x", 0); err == nil || errors.Is(err, fence.ErrStale) {
		t.Errorf("a key of another slot than the fence key's: %v, want the server's refusal", err)
	}
}
