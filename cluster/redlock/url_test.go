package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/redis/go-redis/v9"
)

// TestNewRedlockDuplicateNodes: the library constructor refuses the same
// client twice and two clients of the same node.
func TestNewRedlockDuplicateNodes(t *testing.T) {
	mk := func(addr string) redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }
	a, b, c := mk("127.0.0.1:1"), mk("127.0.0.1:2"), mk("localhost:1")
	defer a.Close()
	defer b.Close()
	defer c.Close()
	for i, nodes := range [][]redis.UniversalClient{
		{a, b, a},
		{a, b, c},
	} {
		if _, err := New(nodes); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("case %d: err %v, want ErrInvalidArgument", i, err)
		}
	}
	d := mk("127.0.0.1:3")
	defer d.Close()
	bk, err := New([]redis.UniversalClient{a, b, d})
	if err != nil {
		t.Fatal(err)
	}
	_ = bk.Close()
	// Failover clients all say "FailoverClient" as their address.
	f1 := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m1", SentinelAddrs: []string{"127.0.0.1:1"}})
	f2 := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m2", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer f1.Close()
	defer f2.Close()
	bk, err = New([]redis.UniversalClient{f1, f2, a})
	if err != nil {
		t.Fatalf("distinct failover clients: %v", err)
	}
	_ = bk.Close()
}

// TestOpenURLDistinctNodesAccepted: distinct nodes, ports in range and a
// host without a port pass the URL's check; OpenURL then asks the nodes,
// which are not there.
func TestOpenURLDistinctNodesAccepted(t *testing.T) {
	for _, raw := range []string{
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=10ms",
		"redlock://127.0.0.1:1,127.0.0.2:1,127.0.0.3:1",
		"redlock://localhost:1,localhost:2,localhost:3",
	} {
		t.Run(raw, func(t *testing.T) {
			b, err := OpenURL(context.Background(), raw)
			if err == nil {
				_ = b.Close()
			}
			if err == nil || errors.Is(err, baton.ErrInvalidArgument) || !strings.Contains(err.Error(), "fewer than a majority") {
				t.Fatalf("%v, want a failure to reach a majority", err)
			}
		})
	}
}

// TestNodeTimeoutOption: the node timeout refuses zero and negative values
// and one over a tenth of the TTL, and redislock.New, which has no nodes to
// time, refuses it.
func TestNodeTimeoutOption(t *testing.T) {
	for _, opts := range [][]lease.Option{
		{WithNodeTimeout(0)},
		{WithNodeTimeout(-1)},
		{lease.WithTTL(time.Second), WithNodeTimeout(200 * time.Millisecond)},
	} {
		if _, err := buildOptions(opts); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%d options: err %v, want ErrInvalidArgument", len(opts), err)
		}
	}
	o, err := buildOptions(nil)
	if err != nil || o.nodeTimeout != DefaultNodeTimeout {
		t.Fatalf("default node timeout %v (%v)", o.nodeTimeout, err)
	}
	o, err = buildOptions([]lease.Option{lease.WithTTL(3 * time.Second), WithNodeTimeout(20 * time.Millisecond)})
	if err != nil || o.nodeTimeout != 20*time.Millisecond {
		t.Fatalf("node timeout %v (%v)", o.nodeTimeout, err)
	}
	if _, err := redislock.OpenURL(context.Background(), "redis://127.0.0.1:1", WithNodeTimeout(time.Millisecond)); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("redislock with a node timeout: err %v, want ErrInvalidArgument", err)
	}
	for _, u := range []string{"redis://127.0.0.1:1", "redlock://127.0.0.1:1,127.0.0.1:2", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=0s",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=x", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:1"} {
		if b, err := OpenURL(context.Background(), u); !errors.Is(err, baton.ErrInvalidArgument) {
			if b != nil {
				b.Close()
			}
			t.Errorf("OpenURL(%q): err %v, want ErrInvalidArgument", u, err)
		}
	}
}
