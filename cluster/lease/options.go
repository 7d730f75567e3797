// Package lease holds what the lease backends of baton share (Redis,
// Redlock, etcd, PostgreSQL, MySQL and ZooKeeper): one Option type with
// the same names, defaults and validation on every backend, the URL query
// parameters that map onto them, and the Session that keeps a lease: its
// deadline, the holds that live on it, their loss, and its renewal in the
// background (Keeper: a session of one hold).
//
// Every lease backend's constructor takes ...lease.Option, so moving from
// one backend to another changes the constructor call and nothing else:
//
//	opts := []lease.Option{lease.WithTTL(5 * time.Second)}
//	b, err := redislock.New(rdb, opts...)
//	// or: b, err := etcdlock.New(cli, opts...)
//
// Options that only one backend has (Redlock's node timeout, etcd's TLS
// configuration) are defined in that backend's package and are Options too
// (see Key); every other backend refuses them with an error matching
// baton.ErrInvalidArgument, as it refuses a common option it cannot honour.
//
// A lease is trusted until its deadline: the local monotonic time at which
// the request that last set the lease on the server was sent, plus the TTL,
// minus the drift margin. The server starts its own TTL when it receives the
// request, which is later, so the local deadline passes before the server
// can give the lock to anyone else, as long as the two clocks advance at
// rates that differ by less than the drift margin over one TTL.
package lease

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/batonlock/baton"
)

// Defaults and limits of the common options, the same on every backend.
const (
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest TTL any backend accepts; a backend whose
	// server counts leases more coarsely (etcd: whole seconds) refuses
	// what it cannot honour.
	MinTTL = 10 * time.Millisecond
	// DefaultRenewDivisor: the renewal period defaults to TTL/3, so that
	// two renewals can fail before the lease is lost.
	DefaultRenewDivisor = 3
	// DefaultDriftFactor and DefaultDriftMin give the drift margin
	// default: 1% of the TTL plus 2 ms, for clock rate differences and
	// scheduling delay.
	DefaultDriftFactor = 0.01
	DefaultDriftMin    = 2 * time.Millisecond
	// DefaultRequestTimeout bounds a request that waits for no other
	// holder (see WithRequestTimeout).
	DefaultRequestTimeout = 5 * time.Second
	// MaxPrefixLen is the longest key prefix.
	MaxPrefixLen = 64
)

// Option configures a lease backend. Options are applied in order by the
// backend's constructor before it does anything else; an Option that
// refuses its argument makes the constructor fail with an error matching
// baton.ErrInvalidArgument, with no side effect.
type Option func(*Config) error

// Config is what a backend's constructor gets from its options (Build).
// Read it; set it through Options only.
type Config struct {
	TTL            time.Duration // lease time given to the server
	RenewEvery     time.Duration // period of background renewal
	Drift          time.Duration // subtracted from the local deadline
	RequestTimeout time.Duration // bound of requests that wait for no holder
	Prefix         string        // key prefix; the backend's own default if not set
	Logger         *slog.Logger  // background failures; never nil after Build

	ext []extValue // backend-specific options (Key)
}

type extValue struct {
	key  keyID
	name string
	v    any
}

// keyID identifies a Key whatever its type parameter.
type keyID *byte

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{baton.ErrInvalidArgument}, args...)...)
}

// positive returns an Option that sets the duration field picks to d. Zero
// or less is refused, not taken for the default, so that a computed value
// that came out zero is not silently replaced.
func positive(what string, d time.Duration, field func(*Config) *time.Duration) Option {
	return func(c *Config) error {
		if d <= 0 {
			return invalid("%s %v: must be > 0", what, d)
		}
		*field(c) = d
		return nil
	}
}

// WithTTL sets the lease TTL of every hold (and, on backends that queue,
// of every queue entry): a holder that dies blocks the others for at most
// this long. Default DefaultTTL; at least MinTTL and at least twice the
// renewal period.
func WithTTL(d time.Duration) Option {
	return positive("lease TTL", d, func(c *Config) *time.Duration { return &c.TTL })
}

// WithRenewEvery sets the period of background renewal. Default TTL/3; it
// must be positive and at most TTL/2.
func WithRenewEvery(d time.Duration) Option {
	return positive("renewal period", d, func(c *Config) *time.Duration { return &c.RenewEvery })
}

// WithDrift sets the drift margin subtracted from a lease's local deadline.
// Default 1% of the TTL + 2 ms; it must be positive and less than
// TTL - RenewEvery.
func WithDrift(d time.Duration) Option {
	return positive("drift margin", d, func(c *Config) *time.Duration { return &c.Drift })
}

// WithRequestTimeout bounds the requests a backend makes on its own, which
// wait for no other holder: renewals, and giving back what a cancelled call
// left (a queue entry, a hold that arrived too late). Requests made for a
// caller are bounded by the caller's context; a backend may bound them by
// this timeout too (see its package). Default DefaultRequestTimeout; it
// must be positive. A renewal is never given longer than the lease has
// left.
func WithRequestTimeout(d time.Duration) Option {
	return positive("request timeout", d, func(c *Config) *time.Duration { return &c.RequestTimeout })
}

// WithPrefix sets the prefix of every key the backend uses; backends with
// different prefixes share nothing. Default: the backend's (DefaultPrefix
// of its package). It must be 1 to MaxPrefixLen bytes of UTF-8 without
// control characters; a backend refuses characters its keys cannot hold
// (Redis: '{' and '}', which would break the hash tag).
func WithPrefix(p string) Option {
	return func(c *Config) error {
		if p == "" || len(p) > MaxPrefixLen || !utf8.ValidString(p) {
			return invalid("key prefix %q: must be 1 to %d bytes of UTF-8", p, MaxPrefixLen)
		}
		if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return invalid("key prefix %q has a control character", p)
		}
		c.Prefix = p
		return nil
	}
}

// WithLogger sets where background failures (renewal, a lost connection)
// are logged. Default slog.Default(); nil is refused.
func WithLogger(l *slog.Logger) Option {
	return func(c *Config) error {
		if l == nil {
			return invalid("nil logger")
		}
		c.Logger = l
		return nil
	}
}

// Key names an option that only some backends have. The backend that
// defines it makes its Options with Key.Option (after validating the
// argument), lists it in Spec.Accept, and reads it with Key.Get; every
// other backend refuses it. The zero Key is not usable; use NewKey.
type Key[T any] struct {
	id   keyID
	name string
}

// NewKey returns a Key; name says what it sets in errors ("redlock node
// timeout").
func NewKey[T any](name string) *Key[T] { return &Key[T]{id: new(byte), name: name} }

// Option returns an Option that sets the key to v.
func (k *Key[T]) Option(v T) Option {
	return func(c *Config) error {
		for i := range c.ext {
			if c.ext[i].key == k.id {
				c.ext[i].v = v
				return nil
			}
		}
		c.ext = append(c.ext, extValue{key: k.id, name: k.name, v: v})
		return nil
	}
}

// Get returns the value an Option set for the key, if one did.
func (k *Key[T]) Get(c *Config) (v T, ok bool) {
	for _, e := range c.ext {
		if e.key == k.id {
			return e.v.(T), true
		}
	}
	return v, false
}

func (k *Key[T]) keyID() keyID { return k.id }

// AnyKey is any Key, for Spec.Accept.
type AnyKey interface{ keyID() keyID }

// Refuse returns an Option that fails with err (which should match
// baton.ErrInvalidArgument): what a backend's option returns for an
// argument it refuses.
func Refuse(err error) Option { return func(*Config) error { return err } }

// Spec is what a backend tells Build.
type Spec struct {
	Prefix string   // the default key prefix
	Accept []AnyKey // the backend-specific options it honours
}

// Build applies opts in order, fills the defaults and validates the
// combination. Errors match baton.ErrInvalidArgument.
func Build(s Spec, opts []Option) (Config, error) {
	var c Config
	for _, o := range opts {
		if o == nil {
			return Config{}, invalid("nil option")
		}
		if err := o(&c); err != nil {
			return Config{}, err
		}
	}
	for _, e := range c.ext {
		ok := false
		for _, k := range s.Accept {
			ok = ok || k.keyID() == e.key
		}
		if !ok {
			return Config{}, invalid("option %s: not an option of this backend", e.name)
		}
	}
	if c.Prefix == "" {
		c.Prefix = s.Prefix
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < MinTTL {
		return Config{}, invalid("lease TTL %v: must be >= %v", c.TTL, MinTTL)
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = c.TTL / DefaultRenewDivisor
	}
	if c.TTL < 2*c.RenewEvery {
		return Config{}, invalid("lease TTL %v is shorter than twice the renewal period %v", c.TTL, c.RenewEvery)
	}
	if c.Drift == 0 {
		c.Drift = DefaultDrift(c.TTL)
	}
	if c.Drift >= c.TTL-c.RenewEvery {
		return Config{}, invalid("drift margin %v leaves no time to renew a lease of %v every %v", c.Drift, c.TTL, c.RenewEvery)
	}
	return c, nil
}

// DefaultDrift returns the default drift margin for a TTL.
func DefaultDrift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*DefaultDriftFactor) + DefaultDriftMin
}

// Deadline returns the local time until which a lease set by a request sent
// at sent can be trusted.
func (c *Config) Deadline(sent time.Time) time.Time {
	return sent.Add(c.TTL - c.Drift)
}
