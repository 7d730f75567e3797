package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/mysqllock"
	"github.com/batonlock/baton/cluster/pglock"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/cluster/redlock"
	"github.com/batonlock/baton/cluster/zklock"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local"
	"github.com/spf13/cobra"
)

// acceptedForms is named in every message about a bad backend URL.
const acceptedForms = "local:, local:///DIR, file:///DIR, redis://host:port, rediss://host:port, " +
	"redis+cluster://h1:p1,h2:p2, redlock://h1:p1,h2:p2,h3:p3, etcd://h1:2379,h2:2379, mysql://user@host:port/db, " +
	"postgres://user@host:5432/db, zk://h1:2181,h2:2181/prefix"

// backendOptions are the command-line settings a backend may use.
type backendOptions struct {
	ttl     time.Duration // lease TTL; 0 for the backend's default; ignored by local
	verbose bool          // log background failures (lease renewal) to stderr
}

// opener opens the backend of one URL scheme.
type opener func(ctx context.Context, rawURL string, o backendOptions) (baton.Backend, error)

// openers maps a URL scheme to its backend.
var openers = map[string]opener{
	"local":          openLocal,
	"file":           openLocal,
	"redis":          openRedis,
	"rediss":         openRedis,
	"redis+cluster":  openRedis,
	"rediss+cluster": openRedis,
	"redlock":        openRedlock,
	"redlocks":       openRedlock,
	"etcd":           openEtcd,
	"etcds":          openEtcd,
	"mysql":          openMySQL,
	"mysql+unix":     openMySQL,
	"zk":             openZK,
	"postgres":       openPostgres,
	"postgresql":     openPostgres,
}

// backendURL returns the URL the command uses: --backend, else
// $BATON_BACKEND, else "local:".
func backendURL(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("backend"); f != nil && f.Changed {
		return f.Value.String()
	}
	if v := os.Getenv("BATON_BACKEND"); v != "" {
		return v
	}
	return "local:"
}

// checkBackendURL validates the scheme of raw without side effects.
func checkBackendURL(raw string) (opener, error) {
	scheme, _, ok := strings.Cut(raw, ":")
	if !ok || scheme == "" {
		return nil, usageErrorf("backend URL %q has no scheme; accepted: %s", raw, acceptedForms)
	}
	op, ok := openers[strings.ToLower(scheme)]
	if !ok {
		return nil, usageErrorf("backend URL scheme %q is not known; accepted: %s", scheme, acceptedForms)
	}
	if strings.EqualFold(scheme, "local") || strings.EqualFold(scheme, "file") {
		if _, err := localDir(raw); err != nil {
			return nil, err
		}
	}
	return op, nil
}

// openBackend opens the backend named by raw. A malformed URL is a usage
// error (exit 64); a backend that cannot be reached is exit 70.
func openBackend(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	op, err := checkBackendURL(raw)
	if err != nil {
		return nil, err
	}
	b, err := op(ctx, raw, o)
	if err != nil {
		if errors.Is(err, baton.ErrInvalidArgument) {
			return nil, usageErrorf("backend URL: %v", err)
		}
		return nil, exitWith(exitBackend, fmt.Errorf("backend %s: %w", redact(raw), err))
	}
	return b, nil
}

// localDir returns the namespace directory of a local: or file: URL, "" for
// the default one.
func localDir(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", usageErrorf("backend URL %q: %v; accepted: %s", raw, err, acceptedForms)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", usageErrorf("backend URL %q: a local URL takes no query, fragment or user; accepted: %s", raw, acceptedForms)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", usageErrorf("backend URL %q: host %q, a local URL names a directory of this host; accepted: %s", raw, u.Host, acceptedForms)
	}
	if u.Opaque != "" {
		return "", usageErrorf("backend URL %q: the directory must be absolute (local:///DIR); accepted: %s", raw, acceptedForms)
	}
	if u.Path == "" {
		if strings.EqualFold(u.Scheme, "file") {
			return "", usageErrorf("backend URL %q names no directory; accepted: %s", raw, acceptedForms)
		}
		return "", nil
	}
	if !filepath.IsAbs(u.Path) {
		return "", usageErrorf("backend URL %q: the directory must be absolute; accepted: %s", raw, acceptedForms)
	}
	return filepath.Clean(u.Path), nil
}

func openLocal(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	dir, err := localDir(raw)
	if err != nil {
		return nil, err
	}
	return local.Open(dir)
}

// logger returns where a cluster backend logs background failures.
func (o backendOptions) logger() *slog.Logger {
	if !o.verbose {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func openRedis(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	return redislock.OpenURL(ctx, raw, o.lease()...)
}

func openRedlock(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	return redlock.OpenURL(ctx, raw, o.lease()...)
}

func openEtcd(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	opts := []lease.Option{lease.WithLogger(o.logger())}
	if o.ttl > 0 {
		opts = append(opts, lease.WithTTL(o.ttl))
	}
	return etcdlock.OpenURL(ctx, raw, opts...)
}

// lease returns the lease options of the command line: its logger, and its
// TTL when given.
func (o backendOptions) lease() []lease.Option {
	opts := []lease.Option{lease.WithLogger(o.logger())}
	if o.ttl > 0 {
		opts = append(opts, lease.WithTTL(o.ttl))
	}
	return opts
}

func openMySQL(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	return mysqllock.OpenURL(ctx, raw, o.lease()...)
}

func openZK(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	return zklock.OpenURL(ctx, raw, o.lease()...)
}

func openPostgres(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	return pglock.OpenURL(ctx, raw, o.lease()...)
}

// childBackendURL is the value of BATON_BACKEND given to the command: the
// URL baton used, with the default local namespace spelled out.
func childBackendURL(raw string) string {
	if dir, err := localDir(raw); err == nil && dir == "" && strings.EqualFold(raw[:strings.IndexByte(raw, ':')], "local") {
		return "local://" + ipc.DefaultDir()
	}
	return raw
}

// redact hides a password in a URL for messages.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}
