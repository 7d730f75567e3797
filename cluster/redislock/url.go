package redislock

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/redis/go-redis/v9"
)

// URL forms accepted by OpenURL.
const urlForms = "redis://[user:pass@]host:port[/db][?opts], rediss://... (TLS), " +
	"redis+cluster://[user:pass@]h1:p1,h2:p2[?opts] (Redis Cluster; rediss+cluster for TLS), " +
	"redlock://[user:pass@]h1:p1,h2:p2,h3:p3[/db][?opts] (Redlock over independent nodes; redlocks for TLS)"

// OpenURL opens a Backend described by rawURL:
//
//	redis://[user:pass@]host:port[/db][?opts]          one node (go-redis ParseURL options)
//	rediss://...                                        the same over TLS
//	redis+cluster://[user:pass@]h1:p1,h2:p2[?opts]      Redis Cluster, seed nodes
//	rediss+cluster://...                                the same over TLS
//	redlock://[user:pass@]h1:p1,h2:p2,h3:p3[/db][?opts] Redlock over independent nodes (at least 3)
//	redlocks://...                                      the same over TLS
//
// Besides the go-redis options, the query may set ttl, renew_every, drift
// and node_timeout (Go durations) and prefix; opts given to OpenURL take
// precedence. The clients OpenURL creates have ContextTimeoutEnabled set and
// are closed with the Backend. An unknown scheme or a malformed URL returns
// an error matching baton.ErrInvalidArgument, before any connection is made.
func OpenURL(ctx context.Context, rawURL string, opts ...Option) (baton.Backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redislock: URL: %v (accepted: %s): %w", err, urlForms, baton.ErrInvalidArgument)
	}
	q := u.Query()
	var own []Option
	for _, k := range []string{"ttl", "renew_every", "drift", "node_timeout"} {
		if !q.Has(k) {
			continue
		}
		d, err := time.ParseDuration(q.Get(k))
		if err != nil {
			return nil, fmt.Errorf("redislock: URL option %s=%q: %v: %w", k, q.Get(k), err, baton.ErrInvalidArgument)
		}
		switch k {
		case "ttl":
			own = append(own, WithTTL(d))
		case "renew_every":
			own = append(own, WithRenewEvery(d))
		case "drift":
			own = append(own, WithDrift(d))
		case "node_timeout":
			own = append(own, WithNodeTimeout(d))
		}
		q.Del(k)
	}
	if q.Has("prefix") {
		own = append(own, WithPrefix(q.Get("prefix")))
		q.Del("prefix")
	}
	opts = append(own, opts...)
	if _, err := buildOptions(opts); err != nil {
		return nil, err
	}
	u.RawQuery = q.Encode()

	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "redis", "rediss":
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("redislock: URL: %v: %w", err, baton.ErrInvalidArgument)
		}
		o.ContextTimeoutEnabled = true
		c := redis.NewClient(o)
		return own1(c, []io.Closer{c}, opts)
	case "redis+cluster", "rediss+cluster":
		hosts, err := hostList(u)
		if err != nil {
			return nil, err
		}
		base := *u
		base.Scheme = strings.TrimSuffix(scheme, "+cluster")
		base.Host = hosts[0]
		q2 := base.Query()
		for _, h := range hosts[1:] {
			q2.Add("addr", h)
		}
		base.RawQuery = q2.Encode()
		o, err := redis.ParseClusterURL(base.String())
		if err != nil {
			return nil, fmt.Errorf("redislock: URL: %v: %w", err, baton.ErrInvalidArgument)
		}
		o.ContextTimeoutEnabled = true
		c := redis.NewClusterClient(o)
		return own1(c, []io.Closer{c}, opts)
	case "redlock", "redlocks":
		hosts, err := hostList(u)
		if err != nil {
			return nil, err
		}
		if len(hosts) < 3 {
			return nil, fmt.Errorf("redislock: URL: redlock needs at least 3 hosts, got %d: %w", len(hosts), baton.ErrInvalidArgument)
		}
		var nodeOpts []*redis.Options
		for _, h := range hosts {
			one := *u
			one.Scheme = "redis"
			if scheme == "redlocks" {
				one.Scheme = "rediss"
			}
			one.Host = h
			o, err := redis.ParseURL(one.String())
			if err != nil {
				return nil, fmt.Errorf("redislock: URL host %s: %v: %w", h, err, baton.ErrInvalidArgument)
			}
			o.ContextTimeoutEnabled = true
			nodeOpts = append(nodeOpts, o)
		}
		clients := make([]redis.UniversalClient, len(nodeOpts))
		closers := make([]io.Closer, len(nodeOpts))
		for i, o := range nodeOpts {
			c := redis.NewClient(o)
			clients[i], closers[i] = c, c
		}
		d, err := newRedlockDriver(clients, opts)
		if err != nil {
			closeAll(closers)
			return nil, err
		}
		d.closers = closers
		return baton.NewBackend(d), nil
	default:
		return nil, fmt.Errorf("redislock: URL scheme %q not accepted (accepted: %s): %w", u.Scheme, urlForms, baton.ErrInvalidArgument)
	}
}

func own1(c redis.UniversalClient, closers []io.Closer, opts []Option) (baton.Backend, error) {
	d, err := newDriver(c, opts)
	if err != nil {
		closeAll(closers)
		return nil, err
	}
	d.closers = closers
	return baton.NewBackend(d), nil
}

func closeAll(cs []io.Closer) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// hostList splits the host part of a multi-host URL ("h1:p1,h2:p2").
func hostList(u *url.URL) ([]string, error) {
	var hosts []string
	for h := range strings.SplitSeq(u.Host, ",") {
		if h == "" {
			return nil, fmt.Errorf("redislock: URL %q has an empty host (accepted: %s): %w", u.Redacted(), urlForms, baton.ErrInvalidArgument)
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("redislock: URL %q has no host (accepted: %s): %w", u.Redacted(), urlForms, baton.ErrInvalidArgument)
	}
	return hosts, nil
}
