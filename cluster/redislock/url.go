package redislock

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/urlparam"
	"github.com/redis/go-redis/v9"
)

// URL forms accepted by OpenURL.
const urlForms = "redis://[user:pass@]host:port[/db][?opts], rediss://... (TLS), " +
	"redis+cluster://[user:pass@]h1:p1,h2:p2[?opts] (Redis Cluster; rediss+cluster for TLS), " +
	"redis+sentinel://[user:pass@]h1:p1,h2:p2/MASTERNAME[/db][?opts] (Sentinels; rediss+sentinel for TLS); " +
	"Redlock's redlock:// URLs are opened by package redlock"

// OpenURL opens a Backend described by rawURL:
//
//	redis://[user:pass@]host:port[/db][?opts]          one node (go-redis ParseURL options)
//	rediss://...                                        the same over TLS
//	redis+cluster://[user:pass@]h1:p1,h2:p2[?opts]      Redis Cluster, seed nodes
//	rediss+cluster://...                                the same over TLS
//	redis+sentinel://[user:pass@]h1:p1,h2:p2/MASTERNAME[/db][?opts]
//	                                                    the master MASTERNAME that the
//	                                                    Sentinels h1:p1, h2:p2… monitor
//	rediss+sentinel://...                               the same over TLS
//
// For Sentinel, user:pass authenticates to the master and its replicas;
// the Sentinels' own credentials, if they have any, are the parameters
// sentinel_username and sentinel_password (or sentinel_password_file,
// sentinel_password_env, read as password_file and password_env). The client follows the master
// through failovers (go-redis' failover client, as NewSentinel).
//
// Besides the go-redis options, the query may set the parameters of
// lease.FromQuery (ttl, renew_every, drift, request_timeout, prefix),
// this package's replicas (WithReplicas, a count) and replica_timeout
// (WithReplicaTimeout, a Go duration), and TLS files and a password by
// reference (ca, cert, key with a TLS scheme; password_file,
// password_env); opts given to OpenURL take
// precedence. The clients OpenURL creates have ContextTimeoutEnabled set and
// are closed with the Backend. An unknown scheme or a malformed URL returns
// an error matching baton.ErrInvalidArgument, before any connection is made.
// OpenURL then asks the server for a PING, once (bounded by the request
// timeout), so that a wrong address or password fails here, with the
// address named, rather than at the first acquisition; opening a Mutex or
// an RWMutex afterwards asks the server nothing.
func OpenURL(ctx context.Context, rawURL string, opts ...lease.Option) (baton.Backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redislock: URL: %v (accepted: %s): %w", err, urlForms, baton.ErrInvalidArgument)
	}
	opts, sec, err := redisnode.Query(u, "URL", opts, replicaQuery, buildOptions)
	if err != nil {
		return nil, err
	}
	scheme := strings.ToLower(u.Scheme)

	switch scheme {
	case "redis", "rediss":
		if err := redisnode.CheckPort(u.Host); err != nil {
			return nil, err
		}
		o, err := redisnode.NodeOptions(u, sec, scheme, "redislock: URL")
		if err != nil {
			return nil, err
		}
		c := redis.NewClient(o)
		return checked(ctx, c, o.Addr, opts)
	case "redis+cluster", "rediss+cluster":
		hosts, err := redisnode.HostList(u, urlForms)
		if err != nil {
			return nil, err
		}
		base := *u
		base.Scheme = strings.TrimSuffix(scheme, "+cluster")
		base.Host = hosts[0]
		q2 := base.Query()
		for _, h := range hosts[1:] {
			q2.Add("addr", h)
		}
		base.RawQuery = q2.Encode()
		o, err := redis.ParseClusterURL(base.String())
		if err != nil {
			return nil, fmt.Errorf("redislock: URL: %v: %w", err, baton.ErrInvalidArgument)
		}
		o.ContextTimeoutEnabled = true
		if err := redisnode.ApplyClusterParams(o, sec, scheme); err != nil {
			return nil, err
		}
		c := redis.NewClusterClient(o)
		return checked(ctx, c, strings.Join(o.Addrs, ","), opts)
	case "redis+sentinel", "rediss+sentinel":
		fo, err := sentinelOptions(u, strings.TrimSuffix(scheme, "+sentinel"))
		if err != nil {
			return nil, err
		}
		fo.ContextTimeoutEnabled = true
		if err := redisnode.ApplyFailoverParams(fo, sec, scheme); err != nil {
			return nil, err
		}
		c := redis.NewFailoverClient(fo)
		return checked(ctx, c, fmt.Sprintf("master %q of the Sentinels %s", fo.MasterName, strings.Join(fo.SentinelAddrs, ",")), opts)
	default:
		return nil, fmt.Errorf("redislock: URL scheme %q not accepted (accepted: %s): %w", u.Scheme, urlForms, baton.ErrInvalidArgument)
	}
}

// checked is own1 for a client that OpenURL made: it checks once that the
// server answers and takes the credentials (redisnode.Check).
func checked(ctx context.Context, c redis.UniversalClient, addrs string, opts []lease.Option) (baton.Backend, error) {
	o, err := buildOptions(opts)
	if err == nil {
		err = redisnode.Check(ctx, c, addrs, o.RequestTimeout)
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redislock: %w", err)
	}
	return own1(c, []io.Closer{c}, opts)
}

func own1(c redis.UniversalClient, closers []io.Closer, opts []lease.Option) (baton.Backend, error) {
	d, err := newDriver(c, opts)
	if err != nil {
		closeAll(closers)
		return nil, err
	}
	d.closers = closers
	return baton.NewBackend(d), nil
}

func closeAll(cs []io.Closer) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// replicaQuery appends to opts the options of the replicas and
// replica_timeout parameters of q, and deletes them from q.
func replicaQuery(q url.Values, opts []lease.Option) ([]lease.Option, error) {
	if vs, ok := q["replicas"]; ok {
		n, err := strconv.Atoi(vs[0])
		if len(vs) != 1 || err != nil {
			return nil, fmt.Errorf("parameter replicas=%q: one count of replicas: %w", strings.Join(vs, ","), baton.ErrInvalidArgument)
		}
		delete(q, "replicas")
		opts = append(opts, WithReplicas(n))
	}
	if d, ok, err := lease.QueryDuration(q, "replica_timeout"); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, WithReplicaTimeout(d))
	}
	return opts, nil
}

// sentinelOptions reads a redis+sentinel URL (with its scheme already
// checked; base is redis or rediss) into go-redis' failover options.
func sentinelOptions(u *url.URL, base string) (*redis.FailoverOptions, error) {
	hosts, err := redisnode.HostList(u, urlForms)
	if err != nil {
		return nil, err
	}
	path := strings.Split(strings.Trim(u.Path, "/"), "/")
	if path[0] == "" || len(path) > 2 {
		return nil, fmt.Errorf("redislock: URL %q: the path must be /MASTERNAME or /MASTERNAME/db (accepted: %s): %w", u.Redacted(), urlForms, baton.ErrInvalidArgument)
	}
	q := u.Query()
	// The Sentinels' password may come from a file or the environment
	// (sentinel_password_file, sentinel_password_env), as passwords do.
	sentPass, _, err := urlparam.Secret(q, "sentinel_password")
	if err != nil {
		return nil, err
	}
	var sentUser string
	for _, p := range []struct {
		name string
		v    *string
	}{{"sentinel_username", &sentUser}} {
		if vs, ok := q[p.name]; ok {
			if len(vs) != 1 {
				return nil, fmt.Errorf("redislock: URL parameter %s given %d times: %w", p.name, len(vs), baton.ErrInvalidArgument)
			}
			*p.v = vs[0]
			delete(q, p.name)
		}
	}
	for _, p := range []string{"master_name", "addr"} {
		if q.Has(p) {
			return nil, fmt.Errorf("redislock: URL parameter %s: the master and the Sentinels are the path and the hosts (accepted: %s): %w", p, urlForms, baton.ErrInvalidArgument)
		}
	}
	q.Set("master_name", path[0])
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	if len(path) == 2 {
		q.Set("db", path[1])
	}
	plain := url.URL{Scheme: base, Host: hosts[0], RawQuery: q.Encode()}
	fo, err := redis.ParseFailoverURL(plain.String())
	if err != nil {
		return nil, fmt.Errorf("redislock: URL: %v: %w", err, baton.ErrInvalidArgument)
	}
	if u.User != nil {
		fo.Username = u.User.Username()
		fo.Password, _ = u.User.Password()
	}
	fo.SentinelUsername, fo.SentinelPassword = sentUser, sentPass
	return fo, nil
}

// NewSentinel returns a Backend on the master that Sentinels monitor:
// fo.MasterName, asked of fo.SentinelAddrs. It makes a go-redis failover
// client from a copy of fo, with ContextTimeoutEnabled set, which follows
// the master through failovers and is closed with the Backend. A nil fo,
// or one without a master name or a Sentinel, returns an error matching
// baton.ErrInvalidArgument.
//
// A failover replicates asynchronously; see WithReplicas for what keeps a
// grant through one, and what does not.
func NewSentinel(fo *redis.FailoverOptions, opts ...lease.Option) (baton.Backend, error) {
	if fo == nil || fo.MasterName == "" || len(fo.SentinelAddrs) == 0 {
		return nil, fmt.Errorf("redislock: Sentinel options need a master name and at least one Sentinel: %w", baton.ErrInvalidArgument)
	}
	if _, err := buildOptions(opts); err != nil {
		return nil, err
	}
	o := *fo
	o.ContextTimeoutEnabled = true
	c := redis.NewFailoverClient(&o)
	return own1(c, []io.Closer{c}, opts)
}
