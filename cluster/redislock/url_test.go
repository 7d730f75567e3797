package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/redis/go-redis/v9"
)

// TestOptionZeroRefused: an explicit zero or negative duration is refused by
// every duration option, rather than taken as the default.
func TestOptionZeroRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  lease.Option
	}{
		{"ttl 0", lease.WithTTL(0)},
		{"ttl -1s", lease.WithTTL(-time.Second)},
		{"renew 0", lease.WithRenewEvery(0)},
		{"renew -1ms", lease.WithRenewEvery(-time.Millisecond)},
		{"drift 0", lease.WithDrift(0)},
		{"drift -1", lease.WithDrift(-1)},
		{"node timeout 0", WithNodeTimeout(0)},
		{"node timeout -1", WithNodeTimeout(-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := buildOptions([]lease.Option{tc.opt}, true); !errors.Is(err, baton.ErrInvalidArgument) {
				t.Fatalf("err %v, want ErrInvalidArgument", err)
			}
		})
	}
	o, err := buildOptions([]lease.Option{lease.WithTTL(3 * time.Second), lease.WithRenewEvery(time.Second), lease.WithDrift(5 * time.Millisecond), WithNodeTimeout(20 * time.Millisecond)}, true)
	if err != nil {
		t.Fatal(err)
	}
	if o.TTL != 3*time.Second || o.RenewEvery != time.Second || o.Drift != 5*time.Millisecond || o.nodeTimeout != 20*time.Millisecond {
		t.Fatalf("options %+v", o)
	}
}

// TestOpenURLRefused: bad URLs fail with ErrInvalidArgument before any
// connection (the ports named here have no server).
func TestOpenURLRefusesBadValues(t *testing.T) {
	for _, raw := range []string{
		"redis://127.0.0.1:1?ttl=0s",
		"redis://127.0.0.1:1?ttl=-1s",
		"redis://127.0.0.1:1?renew_every=0s",
		"redis://127.0.0.1:1?drift=0s",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=0s",
		"redis://127.0.0.1:99999",
		"redis://127.0.0.1:0",
		"redis://127.0.0.1:",
		"rediss://[::1]:65536",
		"redis+cluster://127.0.0.1:1,127.0.0.1:70000",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:99999",
		"redlock://127.0.0.1:1,127.0.0.1:1,127.0.0.1:1",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:1",
		"redlock://localhost:1,127.0.0.1:1,127.0.0.1:3",
		"redlock://LOCALHOST:1,127.0.0.1:2,localhost:1",
		"redlock://unresolvable.invalid:1,127.0.0.1:2,UNRESOLVABLE.invalid:1",
	} {
		t.Run(raw, func(t *testing.T) {
			b, err := OpenURL(context.Background(), raw)
			if err == nil {
				_ = b.Close()
			}
			if !errors.Is(err, baton.ErrInvalidArgument) {
				t.Fatalf("err %v, want ErrInvalidArgument", err)
			}
		})
	}
}

// TestOpenURLDistinctNodesAccepted: distinct nodes, ports in range and a
// host without a port are accepted (nothing is contacted before Lock).
func TestOpenURLDistinctNodesAccepted(t *testing.T) {
	for _, raw := range []string{
		"redis://127.0.0.1:65535",
		"redis://127.0.0.1",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=10ms",
		"redlock://127.0.0.1:1,127.0.0.2:1,127.0.0.3:1",
		"redlock://localhost:1,localhost:2,localhost:3",
	} {
		t.Run(raw, func(t *testing.T) {
			b, err := OpenURL(context.Background(), raw)
			if err != nil {
				t.Fatal(err)
			}
			_ = b.Close()
		})
	}
}

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
		if _, err := NewRedlock(nodes); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("case %d: err %v, want ErrInvalidArgument", i, err)
		}
	}
	d := mk("127.0.0.1:3")
	defer d.Close()
	bk, err := NewRedlock([]redis.UniversalClient{a, b, d})
	if err != nil {
		t.Fatal(err)
	}
	_ = bk.Close()
	// Failover clients all say "FailoverClient" as their address.
	f1 := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m1", SentinelAddrs: []string{"127.0.0.1:1"}})
	f2 := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m2", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer f1.Close()
	defer f2.Close()
	bk, err = NewRedlock([]redis.UniversalClient{f1, f2, a})
	if err != nil {
		t.Fatalf("distinct failover clients: %v", err)
	}
	_ = bk.Close()
}
