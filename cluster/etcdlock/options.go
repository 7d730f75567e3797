package etcdlock

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/batonlock/baton"
)

// Defaults of the options.
const (
	DefaultTTL            = 10 * time.Second
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultPrefix         = "baton/"
)

// Limits of the options.
const (
	MinTTL          = 2 * time.Second
	MaxTTL          = time.Hour
	maxPrefixLength = 256
)

// Option configures New and OpenURL. Options are checked before anything is
// contacted; a bad one makes the constructor fail with an error matching
// baton.ErrInvalidArgument.
type Option func(*options) error

type options struct {
	ttl            time.Duration
	renewal        time.Duration // 0: ttl/3
	drift          time.Duration // -1: ttl/10
	dialTimeout    time.Duration
	requestTimeout time.Duration
	prefix         string
	prefixSet      bool
	tls            *tls.Config
}

func defaultOptions() options {
	return options{
		ttl:            DefaultTTL,
		drift:          -1,
		dialTimeout:    DefaultDialTimeout,
		requestTimeout: DefaultRequestTimeout,
		prefix:         DefaultPrefix,
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("etcdlock: %w: "+format, append([]any{baton.ErrInvalidArgument}, args...)...)
}

// WithTTL sets the TTL of the session lease, a whole number of seconds
// between MinTTL and MaxTTL; default DefaultTTL (10 s). A holder that dies
// blocks the others for at most this long. etcd may grant a longer TTL than
// asked when its election timeout needs it; the granted one is used.
func WithTTL(d time.Duration) Option {
	return func(o *options) error {
		if d < MinTTL || d > MaxTTL || d%time.Second != 0 {
			return invalid("TTL %v: must be whole seconds in [%v, %v]", d, MinTTL, MaxTTL)
		}
		o.ttl = d
		return nil
	}
}

// WithRenewal sets how often the lease is renewed; default a third of the
// TTL. The TTL must be at least twice the renewal period.
func WithRenewal(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalid("renewal period %v: must be > 0", d)
		}
		o.renewal = d
		return nil
	}
}

// WithDriftMargin sets how long before the lease's deadline a hold is
// declared lost when renewals fail, to cover clock rate differences and
// delays; default a tenth of the TTL. It must be >= 0 (0 is no margin, not
// the default) and leave at least one renewal period: TTL - margin >=
// renewal period.
func WithDriftMargin(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return invalid("drift margin %v: must be >= 0", d)
		}
		o.drift = d
		return nil
	}
}

// WithDialTimeout bounds connecting to etcd in OpenURL; default
// DefaultDialTimeout (5 s). New uses the client it is given as it is.
func WithDialTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalid("dial timeout %v: must be > 0", d)
		}
		o.dialTimeout = d
		return nil
	}
}

// WithRequestTimeout bounds every request that does not wait for another
// holder (enqueueing, unlocking, renewing, signalling); default
// DefaultRequestTimeout (5 s). Waiting for a lock is bounded by the caller's
// context only.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalid("request timeout %v: must be > 0", d)
		}
		o.requestTimeout = d
		return nil
	}
}

// WithPrefix sets the key prefix under which every object lives; default
// DefaultPrefix ("baton/"). Backends with different prefixes share nothing.
// It must be 1 to 256 bytes without NUL; a '/' is appended when missing.
func WithPrefix(p string) Option {
	return func(o *options) error {
		if err := checkPrefix(p); err != nil {
			return err
		}
		o.prefix = normPrefix(p)
		o.prefixSet = true
		return nil
	}
}

// WithTLS sets the TLS configuration used by OpenURL for etcds:// URLs;
// default a tls.Config with the system's roots. It is refused with an
// etcd:// URL.
func WithTLS(c *tls.Config) Option {
	return func(o *options) error {
		if c == nil {
			return invalid("nil TLS config")
		}
		o.tls = c
		return nil
	}
}

func checkPrefix(p string) error {
	if p == "" || len(p) > maxPrefixLength || strings.IndexByte(p, 0) >= 0 {
		return invalid("prefix %q: must be 1 to %d bytes without NUL", p, maxPrefixLength)
	}
	return nil
}

func normPrefix(p string) string {
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return o, invalid("nil option")
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.renewal == 0 {
		o.renewal = o.ttl / 3
	}
	if o.drift < 0 {
		o.drift = o.ttl / 10
	}
	if o.ttl < 2*o.renewal {
		return o, invalid("TTL %v shorter than twice the renewal period %v", o.ttl, o.renewal)
	}
	if o.ttl-o.drift < o.renewal {
		return o, invalid("drift margin %v leaves less than one renewal period %v of the TTL %v", o.drift, o.renewal, o.ttl)
	}
	return o, nil
}
