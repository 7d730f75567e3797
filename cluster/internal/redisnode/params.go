package redisnode

import (
	"strings"

	"github.com/batonlock/baton/internal/urlparam"
	"github.com/redis/go-redis/v9"
)

// ApplyParams sets on o, a node of a URL of scheme, the password and the
// TLS material of the URL's shared parameters.
func ApplyParams(o *redis.Options, c urlparam.Common, scheme string) error {
	p, tc, err := params(c, scheme, o.Password, o.TLSConfig != nil)
	if err != nil {
		return err
	}
	o.Password = p
	if tc {
		o.TLSConfig = c.TLSConfig(o.TLSConfig, "")
	}
	return nil
}

// ApplyClusterParams is ApplyParams for Redis Cluster options.
func ApplyClusterParams(o *redis.ClusterOptions, c urlparam.Common, scheme string) error {
	p, tc, err := params(c, scheme, o.Password, o.TLSConfig != nil)
	if err != nil {
		return err
	}
	o.Password = p
	if tc {
		o.TLSConfig = c.TLSConfig(o.TLSConfig, "")
	}
	return nil
}

// ApplyFailoverParams is ApplyParams for the options of a master that
// Sentinels monitor; the password is the master's and its replicas'.
func ApplyFailoverParams(o *redis.FailoverOptions, c urlparam.Common, scheme string) error {
	p, tc, err := params(c, scheme, o.Password, o.TLSConfig != nil)
	if err != nil {
		return err
	}
	o.Password = p
	if tc {
		o.TLSConfig = c.TLSConfig(o.TLSConfig, "")
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
