package lease

import (
	"context"
	"net/url"
	"time"

	"github.com/batonlock/baton"
)

// Register makes baton.Open accept the URLs of schemes, opened by open (a
// lease backend's OpenURL) with no options. Backend packages call it from
// their init function; it panics as baton.Register does.
func Register(open func(ctx context.Context, rawURL string, opts ...Option) (baton.Backend, error), schemes ...string) {
	opener := func(ctx context.Context, rawURL string) (baton.Backend, error) { return open(ctx, rawURL) }
	for _, s := range schemes {
		baton.Register(s, opener)
	}
}

// Query parameters of the common options, the same in every backend's URL.
const (
	ParamTTL            = "ttl"             // WithTTL, a Go duration ("5s")
	ParamRenewEvery     = "renew_every"     // WithRenewEvery
	ParamDrift          = "drift"           // WithDrift
	ParamRequestTimeout = "request_timeout" // WithRequestTimeout
	ParamPrefix         = "prefix"          // WithPrefix
)

// FromQuery returns the Options that the common parameters of q set, in
// the order of the constants above, and deletes those parameters from q, so
// that what is left is the backend's own (or an error for it to report). A
// parameter given twice, or whose value does not parse, is refused with an
// error matching baton.ErrInvalidArgument; the values are validated by the
// Options themselves, in Build.
func FromQuery(q url.Values) ([]Option, error) {
	var opts []Option
	for _, p := range []struct {
		name string
		opt  func(time.Duration) Option
	}{
		{ParamTTL, WithTTL},
		{ParamRenewEvery, WithRenewEvery},
		{ParamDrift, WithDrift},
		{ParamRequestTimeout, WithRequestTimeout},
	} {
		d, ok, err := QueryDuration(q, p.name)
		if err != nil {
			return nil, err
		}
		if ok {
			opts = append(opts, p.opt(d))
		}
	}
	if s, ok, err := queryOne(q, ParamPrefix); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, WithPrefix(s))
	}
	return opts, nil
}

// QueryDuration reads the duration parameter name of q (a Go duration),
// for a backend's own parameters, and deletes it from q. ok is false when q
// does not have it.
func QueryDuration(q url.Values, name string) (d time.Duration, ok bool, err error) {
	s, ok, err := queryOne(q, name)
	if err != nil || !ok {
		return 0, false, err
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, false, invalid("URL parameter %s=%q: not a duration (such as 500ms or 5s)", name, s)
	}
	return d, true, nil
}

// queryOne reads the parameter name of q, given at most once, and deletes it.
func queryOne(q url.Values, name string) (string, bool, error) {
	vs, ok := q[name]
	if !ok {
		return "", false, nil
	}
	if len(vs) != 1 {
		return "", false, invalid("URL parameter %s given %d times", name, len(vs))
	}
	delete(q, name)
	return vs[0], true, nil
}
