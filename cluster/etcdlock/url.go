package etcdlock

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/urlparam"
)

const urlForms = "etcd://host:port[,host:port...][/prefix][?param=value&...] or etcds://... for TLS, optionally with user:password@"

// target is what an etcd URL says.
type target struct {
	endpoints []string
	tls       bool
	username  string
	password  string
	prefix    string         // "" when the URL has no path
	opts      []lease.Option // of the query
	sec       urlparam.Common
}

// parseURL reads
// etcd://[user[:password]@]host[:port][,host[:port]...][/prefix][?query].
// A host without a port gets 2379.
func parseURL(raw string) (target, error) {
	var t target
	bad := func(format string, args ...any) (target, error) {
		return target{}, invalid("URL %q: "+format+"; accepted forms: %s", append(append([]any{baton.RedactURL(raw)}, args...), urlForms)...)
	}
	badOpt := func(err error) (target, error) {
		return target{}, fmt.Errorf("etcdlock: URL %q: %w; accepted forms: %s", baton.RedactURL(raw), err, urlForms)
	}
	h, err := urlparam.ParseHosts(raw, "etcd", "etcds", "2379")
	if errors.Is(err, baton.ErrInvalidArgument) {
		return badOpt(err)
	}
	if err != nil {
		return bad("%v", err)
	}
	t.tls, t.username, t.password, t.endpoints = h.TLS, h.User, h.Password, h.Addrs
	if h.Path != "" {
		t.prefix = normPrefix(h.Path)
		t.opts = append(t.opts, lease.WithPrefix(h.Path))
	}
	q := h.Query
	if t.prefix != "" && q.Has(lease.ParamPrefix) && normPrefix(q.Get(lease.ParamPrefix)) != t.prefix {
		return bad("a prefix in the path and another in the query")
	}
	common, err := lease.FromQuery(q)
	if err != nil {
		return badOpt(err)
	}
	t.opts = append(t.opts, common...)
	if t.sec, err = urlparam.Take(q); err != nil {
		return badOpt(err)
	}
	if t.password, err = t.sec.PasswordOr(t.password, t.password != ""); err != nil {
		return badOpt(err)
	}
	if t.sec.HasTLS() && !t.tls {
		return badOpt(urlparam.NoTLS("etcd", "etcds"))
	}
	if t.sec.HasPassword && t.username == "" {
		return bad("a password parameter with no user name (etcd://user@host?%s=...)", urlparam.PasswordEnv)
	}
	d, ok, err := lease.QueryDuration(q, paramDialTimeout)
	if err != nil {
		return badOpt(err)
	}
	if ok {
		t.opts = append(t.opts, WithDialTimeout(d))
	}
	for k := range q {
		return bad("unknown parameter %q", k)
	}
	// The values are checked here too, so that a bad URL is refused
	// with the accepted forms.
	if _, err := buildOptions(t.opts); err != nil {
		return badOpt(err)
	}
	return t, nil
}

// paramDialTimeout is the query parameter of WithDialTimeout.
const paramDialTimeout = "dial_timeout"

// OpenURL connects to the etcd cluster named by url and returns a Backend
// that owns the client: Close revokes the lease and closes the client.
//
// Accepted forms:
//
//	etcd://host1:2379,host2:2379
//	etcds://host:2379              TLS (WithTLS, default: system roots)
//	etcd://user:password@host:2379 authentication
//	etcd://host:2379/myapp         key prefix "myapp/" instead of "baton/"
//	etcds://user@host:2379?ca=ca.pem&cert=c.pem&key=k.pem&password_env=ETCD_PASS
//	                               CA and client certificate from files, the
//	                               password from $ETCD_PASS (or password_file=FILE)
//
// A host without a port gets 2379. The query may set the common lease
// options by their parameters (lease.FromQuery: ttl, renew_every, drift,
// request_timeout as Go durations, prefix) and dial_timeout; opts given to
// OpenURL take precedence over the URL's. Anything else is refused with an
// error matching baton.ErrInvalidArgument before any connection is made.
// OpenURL grants the session's lease before it returns, so that an
// unreachable cluster fails here (bounded by ctx and the dial timeout).
func OpenURL(ctx context.Context, rawURL string, opts ...lease.Option) (baton.Backend, error) {
	if ctx == nil {
		return nil, invalid("nil context")
	}
	t, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	o, err := buildOptions(append(t.opts, opts...))
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	cfg, err := clientConfig(t, o, ctx)
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: connect %v: %w", t.endpoints, err)
	}
	b := newBackend(c, true, o)
	dctx, cancel := context.WithTimeout(ctx, o.dialTimeout)
	defer cancel()
	if _, err := b.session(dctx); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("etcdlock: %v: %w", t.endpoints, lease.CtxErr(ctx, err))
	}
	return baton.NewBackend(b), nil
}

// clientConfig is the configuration of the client that OpenURL makes.
func clientConfig(t target, o options, ctx context.Context) (clientv3.Config, error) {
	cfg := clientv3.Config{
		Endpoints:   t.endpoints,
		DialTimeout: o.dialTimeout,
		Username:    t.username,
		Password:    t.password,
		Logger:      clientLogger(o.log),
		Context:     context.WithoutCancel(ctx),
	}
	switch {
	case t.tls && o.tls != nil:
		cfg.TLS = o.tls
		if t.sec.HasTLS() {
			cfg.TLS = t.sec.TLSConfig(o.tls, "")
		}
	case t.tls:
		cfg.TLS = t.sec.TLSConfig(nil, "")
	case o.tls != nil:
		return clientv3.Config{}, invalid("WithTLS given with an etcd:// URL; use etcds://")
	}
	return cfg, nil
}
