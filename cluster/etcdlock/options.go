package etcdlock

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// New and OpenURL take the options of package lease, with their names,
// defaults and validation (lease.WithTTL, lease.WithRenewEvery,
// lease.WithDrift, lease.WithRequestTimeout, lease.WithPrefix,
// lease.WithLogger), and two of their own below. What etcd does with them:
//
//   - TTL: the TTL of the Backend's etcd lease, to which every key of its
//     holds is bound. etcd counts lease TTLs in whole seconds, so a TTL
//     that is not a whole number of seconds is refused. etcd may grant a
//     longer TTL than asked when its election timeout needs it; the granted
//     one is used.
//   - RenewEvery, Drift: the period of the lease's renewal, and the margin
//     by which its local deadline precedes the server's.
//   - RequestTimeout: bounds every request that waits for no other holder,
//     the caller's as well as the Backend's own (enqueueing, unlocking,
//     renewing, signalling). Waiting for a holder is bounded by the caller's
//     context only.
//   - Prefix: the prefix of every key (default DefaultPrefix); a '/' is
//     appended when it does not end in one.
//   - Logger: failed renewals and the end of a lease (Warn), renewals
//     (Debug), and what the etcd client that OpenURL makes logs (its
//     levels kept). New leaves the logger of the client it is given alone.

// Defaults of the options of this package, and the key prefix.
const (
	DefaultDialTimeout = 5 * time.Second
	DefaultPrefix      = "baton/"
)

var (
	dialTimeoutKey = lease.NewKey[time.Duration]("etcd dial timeout")
	tlsKey         = lease.NewKey[*tls.Config]("etcd TLS configuration")
)

// WithDialTimeout bounds connecting to etcd in OpenURL; default
// DefaultDialTimeout. New uses the client it is given as it is. Other lease
// backends refuse it.
func WithDialTimeout(d time.Duration) lease.Option {
	if d <= 0 {
		return lease.Refuse(refused("dial timeout %v: must be > 0", d))
	}
	return dialTimeoutKey.Option(d)
}

// WithTLS sets the TLS configuration used by OpenURL for etcds:// URLs;
// default a tls.Config with the system's roots. OpenURL refuses it with an
// etcd:// URL, and other lease backends refuse it.
func WithTLS(c *tls.Config) lease.Option {
	if c == nil {
		return lease.Refuse(refused("nil TLS config"))
	}
	return tlsKey.Option(c)
}

type options struct {
	ttl            time.Duration
	renewal        time.Duration
	drift          time.Duration
	dialTimeout    time.Duration
	requestTimeout time.Duration
	prefix         string
	tls            *tls.Config
	log            *slog.Logger
}

// invalid is the error of a constructor refusing its arguments.
func invalid(format string, args ...any) error {
	return fmt.Errorf("etcdlock: %w: "+format, append([]any{baton.ErrInvalidArgument}, args...)...)
}

// refused is the error of an option refusing its argument; the constructor
// adds its name.
func refused(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{baton.ErrInvalidArgument}, args...)...)
}

func normPrefix(p string) string {
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// buildOptions applies opts; its errors are those of the options, for the
// constructor to name itself in.
func buildOptions(opts []lease.Option) (options, error) {
	c, err := lease.Build(lease.Spec{Prefix: DefaultPrefix, Accept: []lease.AnyKey{dialTimeoutKey, tlsKey}}, opts)
	if err != nil {
		return options{}, err
	}
	if c.TTL%time.Second != 0 {
		return options{}, refused("lease TTL %v: etcd counts leases in whole seconds", c.TTL)
	}
	o := options{
		ttl:            c.TTL,
		renewal:        c.RenewEvery,
		drift:          c.Drift,
		dialTimeout:    DefaultDialTimeout,
		requestTimeout: c.RequestTimeout,
		prefix:         normPrefix(c.Prefix),
		log:            c.Logger,
	}
	if d, ok := dialTimeoutKey.Get(&c); ok {
		o.dialTimeout = d
	}
	o.tls, _ = tlsKey.Get(&c)
	return o, nil
}
