package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := buildOptions([]lease.Option{tc.opt}); !errors.Is(err, baton.ErrInvalidArgument) {
				t.Fatalf("err %v, want ErrInvalidArgument", err)
			}
		})
	}
	o, err := buildOptions([]lease.Option{lease.WithTTL(3 * time.Second), lease.WithRenewEvery(time.Second), lease.WithDrift(5 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if o.TTL != 3*time.Second || o.RenewEvery != time.Second || o.Drift != 5*time.Millisecond {
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

// TestOpenURLPortsAccepted: a port in range, or none (go-redis's default),
// passes the URL's check; OpenURL then asks the server, which is not
// there, and says where it looked.
func TestOpenURLPortsAccepted(t *testing.T) {
	for _, tc := range []struct{ raw, addr string }{{"redis://127.0.0.1:1", "127.0.0.1:1"}, {"redis://127.0.0.2", "127.0.0.2:6379"}} {
		b, err := OpenURL(context.Background(), tc.raw)
		if err == nil {
			_ = b.Close()
		}
		if err == nil || errors.Is(err, baton.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.addr) {
			t.Fatalf("%s: %v, want a failure to reach %s", tc.raw, err, tc.addr)
		}
	}
}
