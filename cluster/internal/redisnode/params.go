package redisnode

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/urlparam"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix of every Redis backend by default, so
// that the baton command's status, ls and rm see the locks of all of them.
const DefaultPrefix = "baton:"

// Config builds the lease options of a Redis backend that also accepts
// the keys of accept, and refuses a key prefix the keys cannot hold: '{'
// or '}' would break the hash tag. (The common rules are those of
// lease.WithPrefix.)
func Config(opts []lease.Option, accept ...lease.AnyKey) (lease.Config, error) {
	c, err := lease.Build(lease.Spec{Prefix: DefaultPrefix, Accept: append(accept, runIDKey)}, opts)
	if err != nil {
		return lease.Config{}, err
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		return lease.Config{}, fmt.Errorf("%w: key prefix %q: '{' and '}' would break the hash tag", baton.ErrInvalidArgument, c.Prefix)
	}
	return c, nil
}

// Query reads the query of u for a backend's OpenURL: the common lease
// parameters, then those that own reads and appends (the backend's), then
// the shared password and TLS parameters, which it returns. It checks with
// build (the backend's) the options of the URL followed by opts, which
// take precedence, and returns them; u keeps the rest of its query, which
// is go-redis's. The errors of the lease parameters and of own are
// prefixed with what.
func Query[O any](u *url.URL, what string, opts []lease.Option, own func(url.Values, []lease.Option) ([]lease.Option, error), build func([]lease.Option) (O, error)) ([]lease.Option, urlparam.Common, error) {
	q, err := urlparam.Query(u.RawQuery)
	if err != nil {
		return nil, urlparam.Common{}, fmt.Errorf("%s: %w", what, err)
	}
	uopts, err := lease.FromQuery(q)
	if err != nil {
		return nil, urlparam.Common{}, fmt.Errorf("%s: %w", what, err)
	}
	if uopts, err = runIDQuery(q, uopts); err != nil {
		return nil, urlparam.Common{}, fmt.Errorf("%s: %w", what, err)
	}
	if uopts, err = own(q, uopts); err != nil {
		return nil, urlparam.Common{}, fmt.Errorf("%s: %w", what, err)
	}
	sec, err := urlparam.Take(q)
	if err != nil {
		return nil, urlparam.Common{}, err
	}
	opts = append(uopts, opts...)
	if _, err := build(opts); err != nil {
		return nil, urlparam.Common{}, err
	}
	u.RawQuery = q.Encode()
	return opts, sec, nil
}

// ApplyParams sets on o, a node of a URL of scheme, the password and the
// TLS material of the URL's shared parameters.
func ApplyParams(o *redis.Options, c urlparam.Common, scheme string) error {
	return apply(c, scheme, &o.Password, &o.TLSConfig)
}

// NodeOptions reads the options of one node from u (redis:// or
// rediss://), with ContextTimeoutEnabled set and the password and TLS
// material of the URL's shared parameters c applied. A URL go-redis
// rejects returns an error prefixed by what and matching
// baton.ErrInvalidArgument.
func NodeOptions(u *url.URL, c urlparam.Common, scheme, what string) (*redis.Options, error) {
	o, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", what, err, baton.ErrInvalidArgument)
	}
	o.ContextTimeoutEnabled = true
	if err := ApplyParams(o, c, scheme); err != nil {
		return nil, err
	}
	return o, nil
}

// ApplyClusterParams is ApplyParams for Redis Cluster options.
func ApplyClusterParams(o *redis.ClusterOptions, c urlparam.Common, scheme string) error {
	return apply(c, scheme, &o.Password, &o.TLSConfig)
}

// ApplyFailoverParams is ApplyParams for the options of a master that
// Sentinels monitor.
func ApplyFailoverParams(o *redis.FailoverOptions, c urlparam.Common, scheme string) error {
	return apply(c, scheme, &o.Password, &o.TLSConfig)
}

// apply sets the password and TLS configuration that the options of each
// client kind keep in fields of their own.
func apply(c urlparam.Common, scheme string, password *string, tc **tls.Config) error {
	p, useTLS, err := params(c, scheme, *password, *tc != nil)
	if err != nil {
		return err
	}
	*password = p
	if useTLS {
		*tc = c.TLSConfig(*tc, "")
	}
	return nil
}

func params(c urlparam.Common, scheme, inline string, hasTLS bool) (string, bool, error) {
	if c.HasTLS() && !hasTLS {
		base, mode, _ := strings.Cut(scheme, "+")
		tlsScheme := base + "s"
		if mode != "" {
			tlsScheme += "+" + mode
		}
		return "", false, urlparam.NoTLS(scheme, tlsScheme)
	}
	p, err := c.PasswordOr(inline, inline != "")
	return p, c.HasTLS(), err
}
