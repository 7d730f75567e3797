package redisnode

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/urlparam"
	"github.com/redis/go-redis/v9"
)

// HostList splits the host part of a multi-host URL ("h1:p1,h2:p2").
func HostList(u *url.URL, forms string) ([]string, error) {
	var hosts []string
	for h := range strings.SplitSeq(u.Host, ",") {
		if h == "" {
			return nil, fmt.Errorf("URL %q has an empty host (accepted: %s): %w", u.Redacted(), forms, baton.ErrInvalidArgument)
		}
		if err := CheckPort(h); err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("URL %q has no host (accepted: %s): %w", u.Redacted(), forms, baton.ErrInvalidArgument)
	}
	return hosts, nil
}

// CheckPort refuses a host that is not host[:port] with a port in
// 1..65535 (urlparam.HostPort); a host without a port gets go-redis's
// default, and an empty one go-redis's default host.
func CheckPort(host string) error {
	if host == "" {
		return nil
	}
	_, _, err := urlparam.HostPort(host, "6379")
	return err
}

// Addr is where a Redlock node is reached.
type Addr struct{ Network, Addr string }

// DistinctClients refuses a Redlock node list that names one node twice: the
// same client, or clients whose addresses are the same node. Such a list
// can never gather a majority of distinct nodes, so Lock would wait
// forever. Clients that do not tell their address (Cluster, Sentinel
// failover) are compared as clients only.
func DistinctClients(clients []redis.UniversalClient) error {
	var addrs []Addr
	for i, c := range clients {
		for j := range i {
			if clients[j] == c {
				return fmt.Errorf("redlock nodes %d and %d are the same client: %w", j, i, baton.ErrInvalidArgument)
			}
		}
		// A failover client's address is a placeholder; its Sentinels
		// find the node.
		if oc, ok := c.(interface{ Options() *redis.Options }); ok && oc.Options().Addr != "FailoverClient" {
			o := oc.Options()
			addrs = append(addrs, Addr{Network: o.Network, Addr: o.Addr})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	return DistinctNodes(ctx, addrs)
}

// resolveTimeout bounds the name lookups of DistinctNodes.
const resolveTimeout = 2 * time.Second

// DistinctNodes refuses two addresses that reach the same node: equal after
// name resolution ("localhost:6379" and "127.0.0.1:6379"). A name that does
// not resolve is compared as written, so a node that is down for now does
// not make the list invalid.
func DistinctNodes(ctx context.Context, addrs []Addr) error {
	seen := make(map[string]string) // endpoint -> the address that named it
	for _, a := range addrs {
		eps := endpoints(ctx, a)
		for _, ep := range eps {
			if prev, ok := seen[ep]; ok {
				return fmt.Errorf("redlock nodes %s and %s are the same node (%s): %w", prev, a.Addr, ep, baton.ErrInvalidArgument)
			}
		}
		for _, ep := range eps {
			seen[ep] = a.Addr
		}
	}
	return nil
}

// endpoints returns the resolved forms of one node's address.
func endpoints(ctx context.Context, a Addr) []string {
	if a.Network == "unix" {
		return []string{"unix:" + filepath.Clean(a.Addr)}
	}
	host, port, err := net.SplitHostPort(a.Addr)
	if err != nil {
		return []string{strings.ToLower(a.Addr)}
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
