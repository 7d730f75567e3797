package redislock

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/urlparam"
	"github.com/redis/go-redis/v9"
)

// URL forms accepted by OpenURL.
const urlForms = "redis://[user:pass@]host:port[/db][?opts], rediss://... (TLS), " +
	"redis+cluster://[user:pass@]h1:p1,h2:p2[?opts] (Redis Cluster; rediss+cluster for TLS); " +
	"Redlock's redlock:// URLs are opened by package redlock"

// OpenURL opens a Backend described by rawURL:
//
//	redis://[user:pass@]host:port[/db][?opts]          one node (go-redis ParseURL options)
//	rediss://...                                        the same over TLS
//	redis+cluster://[user:pass@]h1:p1,h2:p2[?opts]      Redis Cluster, seed nodes
//	rediss+cluster://...                                the same over TLS
//
// Besides the go-redis options, the query may set the parameters of
// lease.FromQuery (ttl, renew_every, drift, request_timeout, prefix), and
// TLS files and a password by reference (ca, cert, key with rediss;
// password_file, password_env); opts
// given to OpenURL take precedence. The clients OpenURL creates have ContextTimeoutEnabled set and
// are closed with the Backend. An unknown scheme or a malformed URL returns
// an error matching baton.ErrInvalidArgument, before any connection is made.
func OpenURL(ctx context.Context, rawURL string, opts ...lease.Option) (baton.Backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redislock: URL: %v (accepted: %s): %w", err, urlForms, baton.ErrInvalidArgument)
	}
	q := u.Query()
	own, err := lease.FromQuery(q)
	if err != nil {
		return nil, fmt.Errorf("URL: %w", err)
	}
	scheme := strings.ToLower(u.Scheme)
	sec, err := urlparam.Take(q)
	if err != nil {
		return nil, err
	}
	opts = append(own, opts...)
	if _, err := buildOptions(opts); err != nil {
		return nil, err
	}
	u.RawQuery = q.Encode()

	switch scheme {
	case "redis", "rediss":
		if err := redisnode.CheckPort(u.Host); err != nil {
			return nil, err
		}
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("redislock: URL: %v: %w", err, baton.ErrInvalidArgument)
		}
		o.ContextTimeoutEnabled = true
		if err := redisnode.ApplyParams(o, sec, scheme); err != nil {
			return nil, err
		}
		c := redis.NewClient(o)
		return own1(c, []io.Closer{c}, opts)
	case "redis+cluster", "rediss+cluster":
		hosts, err := redisnode.HostList(u, urlForms)
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
		if err := redisnode.ApplyClusterParams(o, sec, scheme); err != nil {
			return nil, err
		}
		c := redis.NewClusterClient(o)
		return own1(c, []io.Closer{c}, opts)
	default:
		return nil, fmt.Errorf("redislock: URL scheme %q not accepted (accepted: %s): %w", u.Scheme, urlForms, baton.ErrInvalidArgument)
	}
}

func own1(c redis.UniversalClient, closers []io.Closer, opts []lease.Option) (baton.Backend, error) {
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
