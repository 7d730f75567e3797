package zklock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/urlparam"
)

const urlForms = "zk://[user[:password]@]host:port[,host:port...][/prefix][?ttl=10s&...], or zks://... for TLS"

// target is what a zk URL says.
type target struct {
	servers  []string
	opts     []lease.Option
	tls      bool   // zks://
	user     string // digest authentication, when not empty
	password string
	sec      urlparam.Common
}

// parseURL reads zk[s]://[user[:password]@]host[:port][,host[:port]...][/prefix][?params].
// A host without a port gets 2181; the path, when present, is the prefix;
// the query holds the common lease parameters (ttl is the session timeout)
// and the shared TLS and password parameters (internal/urlparam).
func parseURL(raw string) (target, error) {
	var t target
	bad := func(format string, args ...any) (target, error) {
		return target{}, fmt.Errorf("%w: URL %q: "+format+"; accepted forms: %s",
			append(append([]any{baton.ErrInvalidArgument, baton.RedactURL(raw)}, args...), urlForms)...)
	}
	badOpt := func(err error) (target, error) {
		return target{}, fmt.Errorf("zklock: URL %q: %w; accepted forms: %s", baton.RedactURL(raw), err, urlForms)
	}
	h, err := urlparam.ParseHosts(raw, "zk", "zks", "2181")
	if errors.Is(err, baton.ErrInvalidArgument) {
		return badOpt(err)
	}
	if err != nil {
		return bad("%v", err)
	}
	if strings.Contains(h.User, ":") {
		return bad("user name")
	}
	t.tls, t.user, t.password, t.servers = h.TLS, h.User, h.Password, h.Addrs
	hasPass, q := h.HasPassword, h.Query
	if h.Path != "" && q.Has(lease.ParamPrefix) {
		return bad("both a path and a prefix parameter")
	}
	if t.opts, err = lease.FromQuery(q); err != nil {
		return badOpt(err)
	}
	if t.sec, err = urlparam.Take(q); err != nil {
		return badOpt(err)
	}
	if t.password, err = t.sec.PasswordOr(t.password, hasPass); err != nil {
		return badOpt(err)
	}
	switch {
	case t.sec.HasTLS() && !t.tls:
		return badOpt(urlparam.NoTLS("zk", "zks"))
	case t.sec.HasPassword && t.user == "":
		return bad("a password parameter with no user name (zk://user@host?%s=...)", urlparam.PasswordEnv)
	case t.user != "" && !hasPass && !t.sec.HasPassword:
		return bad("user %q with no password (digest authentication needs one: user:password@, %s or %s)", t.user, urlparam.PasswordFile, urlparam.PasswordEnv)
	}
	for k := range q {
		return bad("unknown parameter %q", k)
	}
	if h.Path != "" {
		t.opts = append(t.opts, lease.WithPrefix("/"+h.Path))
	}
	return t, nil
}

// acl is the ACL of the nodes a Backend of t creates: every permission for
// the digest identity of the URL, and none for anyone else, so that another
// identity can neither read, take nor delete them; without a user, every
// permission for everyone (ZooKeeper's open ACL).
func (t target) acl() []zk.ACL {
	if t.user == "" {
		return zk.WorldACL(zk.PermAll)
	}
	return zk.DigestACL(zk.PermAll, t.user, t.password)
}

// OpenURL dials the servers of a zk:// or zks:// URL with a session
// timeout of the TTL (the ttl parameter, or an option) and returns a
// Backend that closes the connection when it is closed. Options given here
// come after the URL's parameters and override them. The deadlines of
// holds are counted with the timeout the server granted, when it is
// shorter than the TTL. OpenURL waits for the session (at most the request
// timeout) and lists the prefix once, so that an unreachable server, or an
// identity the prefix's nodes refuse (a wrong password), fails here,
// naming the servers.
//
//	zk://h1:2181,h2:2181/app             the prefix /app
//	zk://app:secret@h1:2181/app          digest authentication as app
//	zk://app@h1:2181/app?password_env=ZK_PASSWORD
//	zks://h1:2281/app?ca=ca.pem&cert=client.pem&key=client-key.pem
//
// zks:// speaks TLS to the servers' secure client port (secureClientPort),
// verifying them with the system's roots or the ca file; cert and key are
// the client certificate the server may ask for. With a user, the session
// adds the digest identity user:password (again after every reconnection),
// and the nodes the Backend creates carry an ACL that gives that identity
// every permission and no one else any: another identity cannot delete a
// holder's node, nor take or list the locks. Every client of a prefix must
// then use the same identity.
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
	session := make(chan struct{})
	var once sync.Once
	neg := new(atomic.Int64)
	// The client uses one connection at a time, but does not close the
	// one on which the server said the session expired: close it here,
	// when the next one is dialled, or when the backend closes (conns).
	conns := &lastConn{}
	d := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if !conns.drop() {
			return nil, net.ErrClosed
		}
		c, err := dialServer(t, network, addr, timeout)
		if err != nil {
			return nil, err
		}
		if !conns.keep(c) {
			c.Close()
			return nil, net.ErrClosed
		}
		return newWireConn(c, &conns.zxid, func(ms int32) {
			if ms > 0 {
				neg.Store(int64(time.Duration(ms) * time.Millisecond))
			}
		}), nil
	}
	c, _, err := zk.Connect(t.servers, o.TTL, zk.WithDialer(d), zk.WithLogInfo(false), zk.WithLogger(zkLogger{o.Logger}),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.State == zk.StateHasSession {
				once.Do(func() { close(session) })
			}
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
	b = newBackend(c, true, o, neg, t.acl())
	b.conns = conns
	mu.Unlock()
	// Wait for a session, so that a server that cannot be reached is an
	// error here rather than at the first acquisition; the client retries
	// on its own, so the wait is bounded as a request is.
	wctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	defer cancel()
	select {
	case <-session:
	case <-wctx.Done():
		_ = b.Close()
		if ctx.Err() == nil {
			return nil, fmt.Errorf("connect to %s: no session within %v", strings.Join(t.servers, ","), o.RequestTimeout)
		}
		return nil, fmt.Errorf("connect to %s: %w", strings.Join(t.servers, ","), ctx.Err())
	}
	if t.user != "" {
		// The client sends the identity again on every new connection.
		if err := c.AddAuth("digest", []byte(t.user+":"+t.password)); err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("authenticate as %q: %w", t.user, err)
		}
	}
	// ZooKeeper takes any digest identity; a wrong password shows as the
	// nodes of the right one refusing it. Ask the prefix once, so that it
	// shows here rather than at the first acquisition.
	if _, _, err := c.Children(o.Prefix); err != nil && !errors.Is(err, zk.ErrNoNode) {
		_ = b.Close()
		return nil, fmt.Errorf("%s: prefix %s: %w", strings.Join(t.servers, ","), o.Prefix, err)
	}
	return b, nil
}

// lastConn is the connection the client dialled last.
type lastConn struct {
	mu     sync.Mutex
	c      net.Conn     // guarded by mu
	closed bool         // guarded by mu; no more connections
	zxid   atomic.Int64 // the newest zxid a reply carried in this session (wire.go)
}

// drop closes the last connection; it reports false once closed.
func (l *lastConn) drop() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		l.c.Close()
		l.c = nil
	}
	return !l.closed
}

// keep records c as the last connection; it reports false once closed.
func (l *lastConn) keep(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.c = c
	return !l.closed
}

// close closes the last connection and refuses new ones.
func (l *lastConn) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.drop()
}

// dialServer opens a connection to one server: TCP, or TLS for zks://,
// verifying the server's certificate for the host it is dialled by.
func dialServer(t target, network, addr string, timeout time.Duration) (net.Conn, error) {
	if !t.tls {
		return net.DialTimeout(network, addr, timeout)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg := t.sec.TLSConfig(nil, host)
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
}

// zkLogger passes what the ZooKeeper client logs (with WithLogInfo(false):
// its failures, such as a connection lost or refused) to the logger of
// lease.WithLogger, at Warn.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Warn("baton: zookeeper client: " + fmt.Sprintf(format, args...))
}
