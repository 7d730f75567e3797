package redislock

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
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
// Besides the go-redis options, the query may set the parameters of
// lease.FromQuery (ttl, renew_every, drift, request_timeout, prefix) and,
// for redlock, node_timeout (a Go duration); opts given to OpenURL take
// precedence. The clients OpenURL creates have ContextTimeoutEnabled set and
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
	redlock := scheme == "redlock" || scheme == "redlocks"
	if d, ok, err := lease.QueryDuration(q, "node_timeout"); err != nil {
		return nil, fmt.Errorf("URL: %w", err)
	} else if ok {
		own = append(own, WithNodeTimeout(d))
	}
	opts = append(own, opts...)
	if _, err := buildOptions(opts, redlock); err != nil {
		return nil, err
	}
	u.RawQuery = q.Encode()

	switch scheme {
	case "redis", "rediss":
		if err := checkPort(u.Host); err != nil {
			return nil, err
		}
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
		addrs := make([]nodeAddr, len(nodeOpts))
		for i, o := range nodeOpts {
			addrs[i] = nodeAddr{network: o.Network, addr: o.Addr}
		}
		if err := distinctNodes(ctx, addrs); err != nil {
			return nil, err
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

// hostList splits the host part of a multi-host URL ("h1:p1,h2:p2").
func hostList(u *url.URL) ([]string, error) {
	var hosts []string
	for h := range strings.SplitSeq(u.Host, ",") {
		if h == "" {
			return nil, fmt.Errorf("redislock: URL %q has an empty host (accepted: %s): %w", u.Redacted(), urlForms, baton.ErrInvalidArgument)
		}
		if err := checkPort(h); err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("redislock: URL %q has no host (accepted: %s): %w", u.Redacted(), urlForms, baton.ErrInvalidArgument)
	}
	return hosts, nil
}

// checkPort refuses a host whose port is not a number in 1..65535; a host
// without a port gets go-redis's default.
func checkPort(host string) error {
	u := url.URL{Host: host}
	p := u.Port()
	if p == "" && !strings.HasSuffix(host, ":") {
		return nil
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("redislock: URL host %q: port must be in 1..65535: %w", host, baton.ErrInvalidArgument)
	}
	return nil
}

// nodeAddr is where a Redlock node is reached.
type nodeAddr struct{ network, addr string }

// distinctClients refuses a Redlock node list that names one node twice: the
// same client, or clients whose addresses are the same node. Such a list
// can never gather a majority of distinct nodes, so Lock would wait
// forever. Clients that do not tell their address (Cluster, Sentinel
// failover) are compared as clients only.
func distinctClients(clients []redis.UniversalClient) error {
	var addrs []nodeAddr
	for i, c := range clients {
		for j := range i {
			if clients[j] == c {
				return fmt.Errorf("redislock: redlock nodes %d and %d are the same client: %w", j, i, baton.ErrInvalidArgument)
			}
		}
		// A failover client's address is a placeholder; its Sentinels
		// find the node.
		if oc, ok := c.(interface{ Options() *redis.Options }); ok && oc.Options().Addr != "FailoverClient" {
			o := oc.Options()
			addrs = append(addrs, nodeAddr{network: o.Network, addr: o.Addr})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	return distinctNodes(ctx, addrs)
}

// resolveTimeout bounds the name lookups of distinctNodes.
const resolveTimeout = 2 * time.Second

// distinctNodes refuses two addresses that reach the same node: equal after
// name resolution ("localhost:6379" and "127.0.0.1:6379"). A name that does
// not resolve is compared as written, so a node that is down for now does
// not make the list invalid.
func distinctNodes(ctx context.Context, addrs []nodeAddr) error {
	seen := make(map[string]string) // endpoint -> the address that named it
	for _, a := range addrs {
		eps := endpoints(ctx, a)
		for _, ep := range eps {
			if prev, ok := seen[ep]; ok {
				return fmt.Errorf("redislock: redlock nodes %s and %s are the same node (%s): %w", prev, a.addr, ep, baton.ErrInvalidArgument)
			}
		}
		for _, ep := range eps {
			seen[ep] = a.addr
		}
	}
	return nil
}

// endpoints returns the resolved forms of one node's address.
func endpoints(ctx context.Context, a nodeAddr) []string {
	if a.network == "unix" {
		return []string{"unix:" + filepath.Clean(a.addr)}
	}
	host, port, err := net.SplitHostPort(a.addr)
	if err != nil {
		return []string{strings.ToLower(a.addr)}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []string{net.JoinHostPort(ip.Unmap().String(), port)}
	}
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil || len(ips) == 0 {
		return []string{net.JoinHostPort(strings.ToLower(strings.TrimSuffix(host, ".")), port)}
	}
	eps := make([]string, 0, len(ips))
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil {
			s = ip.Unmap().String()
		}
		eps = append(eps, net.JoinHostPort(s, port))
	}
	return eps
}
