package redlock

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/redis/go-redis/v9"
)

// URL forms accepted by OpenURL.
const urlForms = "redlock://[user:pass@]h1:p1,h2:p2,h3:p3[/db][?opts] (at least 3 independent nodes), redlocks://... (TLS)"

// OpenURL opens a Backend described by rawURL:
//
//	redlock://[user:pass@]h1:p1,h2:p2,h3:p3[/db][?opts] independent nodes (at least 3)
//	redlocks://...                                      the same over TLS
//
// Besides the go-redis options, the query may set the parameters of
// lease.FromQuery (ttl, renew_every, drift, request_timeout, prefix) and
// node_timeout (a Go duration), and TLS files and a password by
// reference (ca, cert, key, password_file, password_env); opts given to OpenURL take precedence. The
// clients OpenURL creates have ContextTimeoutEnabled set and are closed with
// the Backend. An unknown scheme, a malformed URL or a node named twice
// returns an error matching baton.ErrInvalidArgument, before any connection
// is made. OpenURL then asks every node for a PING, once: it fails, naming
// the nodes, when one refuses the credentials or fewer than a majority
// answer (a node merely down is tolerated, as Redlock works without it).
func OpenURL(ctx context.Context, rawURL string, opts ...lease.Option) (baton.Backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redlock: URL: %v (accepted: %s): %w", err, urlForms, baton.ErrInvalidArgument)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "redlock" && scheme != "redlocks" {
		return nil, fmt.Errorf("redlock: URL scheme %q not accepted (accepted: %s): %w", u.Scheme, urlForms, baton.ErrInvalidArgument)
	}
	opts, sec, err := redisnode.Query(u, "redlock: URL", opts, nodeTimeoutQuery, buildOptions)
	if err != nil {
		return nil, err
	}
	hosts, err := redisnode.HostList(u, urlForms)
	if err != nil {
		return nil, err
	}
	if len(hosts) < 3 {
		return nil, fmt.Errorf("redlock: URL: needs at least 3 hosts, got %d: %w", len(hosts), baton.ErrInvalidArgument)
	}
	var nodeOpts []*redis.Options
	for _, h := range hosts {
		one := *u
		one.Scheme = "redis"
		if scheme == "redlocks" {
			one.Scheme = "rediss"
		}
		one.Host = h
		o, err := redisnode.NodeOptions(&one, sec, scheme, "redlock: URL host "+h)
		if err != nil {
			return nil, err
		}
		nodeOpts = append(nodeOpts, o)
	}
	addrs := make([]redisnode.Addr, len(nodeOpts))
	for i, o := range nodeOpts {
		addrs[i] = redisnode.Addr{Network: o.Network, Addr: o.Addr}
	}
	if err := redisnode.DistinctNodes(ctx, addrs); err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	clients := make([]redis.UniversalClient, len(nodeOpts))
	closers := make([]io.Closer, len(nodeOpts))
	nodes := make([]*redis.Client, len(nodeOpts))
	for i, o := range nodeOpts {
		c := redis.NewClient(o)
		clients[i], closers[i], nodes[i] = c, c, c
	}
	d, err := newDriver(clients, opts)
	if err == nil {
		if err = checkNodes(ctx, nodes, d.o.RequestTimeout); err != nil {
			err = fmt.Errorf("redlock: %w", err)
		}
	}
	if err != nil {
		for _, c := range closers {
			_ = c.Close()
		}
		return nil, err
	}
	d.closers = closers
	return baton.NewBackend(d), nil
}

// nodeTimeoutQuery appends to opts the option of the node_timeout parameter
// of q, and deletes it from q.
func nodeTimeoutQuery(q url.Values, opts []lease.Option) ([]lease.Option, error) {
	d, ok, err := lease.QueryDuration(q, "node_timeout")
	if err != nil {
		return nil, err
	}
	if ok {
		opts = append(opts, WithNodeTimeout(d))
	}
	return opts, nil
}
