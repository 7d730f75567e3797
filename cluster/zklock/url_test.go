package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		servers []string
		prefix  string
		ttl     time.Duration
	}{
		{"zk://h1", []string{"h1:2181"}, DefaultPrefix, lease.DefaultTTL},
		{"zk://h1:1,h2:2/app/locks", []string{"h1:1", "h2:2"}, "/app/locks", lease.DefaultTTL},
		{"ZK://[::1]:2181/p?ttl=3s", []string{"[::1]:2181"}, "/p", 3 * time.Second},
		{"zk://h/?prefix=x/y", []string{"h:2181"}, "/x/y", lease.DefaultTTL},
	} {
		tg, err := parseURL(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		o, err := buildConfig(tg.opts)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if len(tg.servers) != len(tc.servers) || tg.servers[0] != tc.servers[0] || o.Prefix != tc.prefix || o.TTL != tc.ttl {
			t.Errorf("%s: servers %v prefix %q ttl %v, want %v %q %v", tc.in, tg.servers, o.Prefix, o.TTL, tc.servers, tc.prefix, tc.ttl)
		}
	}
	for _, in := range []string{
		"zk:/h", "etcd://h", "zk://", "zk://h:0", "zk://h:99999", "zk://h:x", "zk://u@h", "zk://h#f",
		"zk://h?ttl=0s", "zk://h?ttl=soon", "zk://h?ttl=1s&ttl=2s", "zk://h?color=red",
		"zk://h/p?prefix=q", "zk://h/a/../b", "zk://h?renew_every=2s&ttl=3s",
		"zk://h?ttl=10s&renew_every=5s&drift=4100ms", // drift + TTL/10 leaves no time to renew
	} {
		_, err := parseURL(in)
		if err == nil {
			var tg target
			tg, _ = parseURL(in)
			_, err = buildConfig(tg.opts)
		}
		if !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", in, err)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
	c := connect(t, []string{standalone(t)}, 2*time.Second)
	for _, o := range []lease.Option{lease.WithTTL(0), lease.WithPrefix("/"), lease.WithPrefix("a//b"), nil} {
		if _, err := New(c, o); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("New with a bad option: %v", err)
		}
	}
}

// TestGrantedTimeout: a TTL longer than the server allows is counted as
// the timeout the server granted.
func TestGrantedTimeout(t *testing.T) {
	addr := standalone(t) // maxSessionTimeout=60000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := dial(ctx, "zk://"+addr+"/granted?ttl=2m", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.timeout(); got != time.Minute {
		t.Errorf("session timeout counted: %v, want the granted 1m", got)
	}
}
