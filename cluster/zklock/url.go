package zklock

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/urlparam"
)

const urlForms = "zk://host:port[,host:port...][/prefix][?ttl=10s&...]"

// target is what a zk URL says.
type target struct {
	servers []string
	opts    []lease.Option
}

// parseURL reads zk://host[:port][,host[:port]...][/prefix][?params]. A
// host without a port gets 2181; the path, when present, is the prefix;
// the query holds the common lease parameters (ttl is the session timeout).
func parseURL(raw string) (target, error) {
	var t target
	bad := func(format string, args ...any) (target, error) {
		return target{}, fmt.Errorf("%w: URL %q: "+format+"; accepted form: %s",
			append(append([]any{baton.ErrInvalidArgument, raw}, args...), urlForms)...)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !strings.EqualFold(scheme, "zk") {
		return bad("scheme")
	}
	if strings.Contains(rest, "#") {
		return bad("fragment")
	}
	rest, query, _ := strings.Cut(rest, "?")
	hosts, path, hasPath := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return bad("user information is not supported")
	}
	for h := range strings.SplitSeq(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			if strings.ContainsAny(h, ":[]") {
				return bad("host %q", h)
			}
			host, port = h, "2181"
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return bad("port %q", port)
		}
		if host == "" || strings.ContainsAny(host, " \t\x00/") {
			return bad("host %q", h)
		}
		t.servers = append(t.servers, net.JoinHostPort(host, port))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: %v", err)
	}
	if hasPath && path != "" && q.Has(lease.ParamPrefix) {
		return bad("both a path and a prefix parameter")
	}
	if t.opts, err = lease.FromQuery(q); err != nil {
		return target{}, err
	}
	for _, k := range []string{urlparam.CA, urlparam.Cert, urlparam.Key, urlparam.PasswordFile, urlparam.PasswordEnv} {
		if q.Has(k) {
			return bad("parameter %q: zk:// has no TLS and no authentication", k)
		}
	}
	for k := range q {
		return bad("unknown parameter %q", k)
	}
	if hasPath && path != "" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return bad("path: %v", err)
		}
		t.opts = append(t.opts, lease.WithPrefix("/"+p))
	}
	return t, nil
}

// OpenURL dials the servers of a zk:// URL with a session timeout of the
// TTL (the ttl parameter, or an option) and returns a Backend that closes
// the connection when it is closed. Options given here come after the
// URL's parameters and override them. The deadlines of holds are counted
// with the timeout the server granted, when it is shorter than the TTL.
func OpenURL(ctx context.Context, raw string, opts ...lease.Option) (baton.Backend, error) {
	b, err := dial(ctx, raw, opts)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(b), nil
}

// dial is OpenURL without the core.
func dial(ctx context.Context, raw string, opts []lease.Option) (*backend, error) {
	t, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	o, err := buildConfig(append(t.opts, opts...))
	if err != nil {
		return nil, err
	}
	var b *backend
	var mu sync.Mutex // b is set after Connect returns; events may come before
	neg := new(atomic.Int64)
	// The client uses one connection at a time, but does not close the
	// one on which the server said the session expired: close it here,
	// when the next one is dialled.
	var last net.Conn
	d := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if last != nil {
			last.Close()
			last = nil
		}
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		last = c
		return &grantConn{Conn: c, got: func(ms int32) {
			if ms > 0 {
				neg.Store(int64(time.Duration(ms) * time.Millisecond))
			}
		}}, nil
	}
	c, _, err := zk.Connect(t.servers, o.TTL, zk.WithDialer(d), zk.WithLogInfo(false), zk.WithLogger(zkLogger{o.Logger}),
		zk.WithEventCallback(func(ev zk.Event) {
			mu.Lock()
			bb := b
			mu.Unlock()
			if bb != nil {
				bb.onEvent(ev)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", baton.ErrInvalidArgument, err)
	}
	mu.Lock()
	b = newBackend(c, true, o, neg)
	mu.Unlock()
	// Wait for a session, so that a server that cannot be reached is an
	// error here rather than at the first acquisition.
	for c.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			_ = b.Close()
			return nil, fmt.Errorf("connect to %s: %w", strings.Join(t.servers, ","), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return b, nil
}

// zkLogger passes what the ZooKeeper client logs (with WithLogInfo(false):
// its failures, such as a connection lost or refused) to the logger of
// lease.WithLogger, at Warn.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Warn("baton: zookeeper client: " + fmt.Sprintf(format, args...))
}

// grantConn reads the session timeout the server grants out of the
// connect response, the first message on a connection: length, protocol
// version, timeout in ms.
type grantConn struct {
	net.Conn
	head [12]byte
	n    int
	got  func(ms int32)
}

func (c *grantConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	if c.n < len(c.head) {
		c.n += copy(c.head[c.n:], p[:k])
		if c.n == len(c.head) {
			c.got(int32(binary.BigEndian.Uint32(c.head[8:12])))
		}
	}
	return k, err
}
