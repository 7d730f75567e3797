package pglock

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/urlparam"
)

// defaultMaxConns is the pool size of OpenURL when the URL sets none
// (pool_max_conns): every hold and every waiter takes a connection.
const defaultMaxConns = 64

// OpenURL connects to the server named by a postgres:// or postgresql://
// URL (libpq's URL form; pgxpool's pool_* parameters are accepted, and the
// lease parameters of package lease: ttl, renew_every, drift,
// request_timeout, prefix; URL parameters come before opts; and the TLS
// files and password references of every network URL: ca, cert, key,
// password_file, password_env) and
// returns a Backend that owns its pool: Close closes it. It connects and
// creates the tables before it returns, so that an unreachable server or a
// missing right fails here. A bad URL is refused with an error matching
// baton.ErrInvalidArgument before any connection is made.
func OpenURL(ctx context.Context, rawURL string, opts ...lease.Option) (baton.Backend, error) {
	pool, o, err := openPool(ctx, rawURL, opts)
	if err != nil {
		return nil, err
	}
	b := newBackend(pool, true, o)
	if err := b.schema(ctx); err != nil {
		cfg := pool.Config().ConnConfig
		pool.Close()
		return nil, fmt.Errorf("%s:%d: %w", cfg.Host, cfg.Port, err)
	}
	return baton.NewBackend(b), nil
}

// openPool is OpenURL's pool, with the lease options of the URL and opts.
func openPool(ctx context.Context, rawURL string, opts []lease.Option) (*pgxpool.Pool, lease.Config, error) {
	if ctx == nil {
		return nil, lease.Config{}, fmt.Errorf("%w: nil context", baton.ErrInvalidArgument)
	}
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || (!strings.EqualFold(scheme, "postgres") && !strings.EqualFold(scheme, "postgresql")) {
		return nil, lease.Config{}, fmt.Errorf("%w: URL %q: want postgres://[user[:password]@]host[:port]/database[?...]",
			baton.ErrInvalidArgument, baton.RedactURL(rawURL))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, lease.Config{}, fmt.Errorf("%w: URL: %v", baton.ErrInvalidArgument, err)
	}
	q, err := urlparam.Query(u.RawQuery)
	if err != nil {
		return nil, lease.Config{}, err
	}
	if u.Host != "" {
		for h := range strings.SplitSeq(u.Host, ",") {
			if _, _, err := urlparam.HostPort(h, "5432"); err != nil {
				return nil, lease.Config{}, err
			}
		}
	}
	uopts, err := lease.FromQuery(q)
	if err != nil {
		return nil, lease.Config{}, err
	}
	sec, err := urlparam.Take(q)
	if err != nil {
		return nil, lease.Config{}, err
	}
	if sec.HasTLS() && (q.Has("sslmode") || q.Has("sslrootcert") || q.Has("sslcert") || q.Has("sslkey")) {
		return nil, lease.Config{}, fmt.Errorf("%w: URL: both ssl* and %s/%s/%s parameters", baton.ErrInvalidArgument, urlparam.CA, urlparam.Cert, urlparam.Key)
	}
	u.RawQuery = q.Encode()
	o, err := buildOptions(append(uopts, opts...))
	if err != nil {
		return nil, lease.Config{}, err
	}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, lease.Config{}, fmt.Errorf("%w: URL: %v", baton.ErrInvalidArgument, err)
	}
	inline, hasInline := "", false
	if u.User != nil {
		inline, hasInline = u.User.Password()
	}
	if sec.HasPassword {
		if cfg.ConnConfig.Password, err = sec.PasswordOr(inline, hasInline); err != nil {
			return nil, lease.Config{}, err
		}
	}
	if sec.HasTLS() {
		// Verified TLS on every attempt: no plain-text fallback.
		cfg.ConnConfig.TLSConfig = sec.TLSConfig(nil, cfg.ConnConfig.Host)
		cfg.ConnConfig.Fallbacks = nil
	}
	if !q.Has("pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	// The server notices a client gone while its session waits for a lock;
	// an idle holder's session is ended by idle_session_timeout instead.
	rp := cfg.ConnConfig.RuntimeParams
	for k, v := range map[string]string{
		"tcp_keepalives_idle":     strconv.Itoa(max(1, int(o.TTL/time.Second/2))),
		"tcp_keepalives_interval": "1",
		"tcp_keepalives_count":    "3",
		"application_name":        ApplicationName(), // names the holder in Inspect
		// The statements are prepared once per connection, and their
		// plans are the same whatever the arguments (index reads of a few
		// rows), but a parameter as a LIMIT or an array makes the server
		// judge a plan of its own for the arguments cheaper and plan again
		// at every run: for a gathered claim, most of its time.
		"plan_cache_mode": "force_generic_plan",
	} {
		if _, set := rp[k]; !set {
			rp[k] = v
		}
	}
	pool, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, o, fmt.Errorf("%w: URL: %v", baton.ErrInvalidArgument, err)
	}
	return pool, o, nil
}
