package baton

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// An Opener opens the Backend that a URL of its scheme names. It refuses a
// malformed URL with an error matching ErrInvalidArgument before it
// connects or creates anything.
type Opener func(ctx context.Context, rawURL string) (Backend, error)

var registry struct {
	sync.RWMutex
	m map[string]Opener
}

// Register makes Open accept URLs of scheme, opened by open. Backend
// packages call it from their init function, so that a program accepts the
// URLs of the backends it imports (a blank import is enough) and links no
// other backend's client. The scheme is matched without regard to case.
// Register panics if open is nil, the scheme is empty or it is registered
// twice, as these are programming errors.
func Register(scheme string, open Opener) {
	if open == nil {
		panic("baton: Register of a nil Opener")
	}
	s := strings.ToLower(scheme)
	if s == "" || strings.ContainsAny(s, ":/") {
		panic(fmt.Sprintf("baton: Register of scheme %q", scheme))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[s]; dup {
		panic(fmt.Sprintf("baton: Register called twice for scheme %q", s))
	}
	if registry.m == nil {
		registry.m = make(map[string]Opener)
	}
	registry.m[s] = open
}

// Schemes returns the schemes that Open accepts, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	s := make([]string, 0, len(registry.m))
	for k := range registry.m {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the Backend that rawURL names, by the Opener registered for
// its scheme:
//
//	local:  local:///DIR  file:///DIR                 package local
//	redis:// rediss:// redis+cluster:// rediss+cluster://
//	redis+sentinel:// rediss+sentinel://              package cluster/redislock
//	redlock:// redlocks://                            package cluster/redlock
//	etcd:// etcds://                                  package cluster/etcdlock
//	mysql:// mysql+unix://                            package cluster/mysqllock
//	postgres:// postgresql://                         package cluster/pglock
//	zk://                                             package cluster/zklock
//
// Only the schemes of the packages the program imports are registered. The
// network schemes share the query parameters of their lease options (ttl,
// renew_every, drift, request_timeout, prefix), TLS from files (ca, cert,
// key) and a password read from a file or an environment variable
// (password_file, password_env) rather than written in the URL. An
// unknown scheme or a malformed URL is refused with an error matching
// ErrInvalidArgument, before anything is created. The text of every error
// Open returns has the URL's password masked.
func Open(ctx context.Context, rawURL string) (Backend, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: Open with a nil context", ErrInvalidArgument)
	}
	scheme, _, ok := strings.Cut(rawURL, ":")
	registry.RLock()
	open := registry.m[strings.ToLower(scheme)]
	registry.RUnlock()
	if !ok || scheme == "" || open == nil {
		what := fmt.Sprintf("scheme %q is not registered", scheme)
		if !ok || scheme == "" {
			what = "no scheme"
		}
		return nil, fmt.Errorf("%w: URL %q: %s (registered: %s; a backend's package registers its schemes when imported)",
			ErrInvalidArgument, RedactURL(rawURL), what, strings.Join(Schemes(), ", "))
	}
	b, err := open(ctx, rawURL)
	if err != nil {
		return nil, maskSecret(rawURL, err)
	}
	return b, nil
}

// RedactURL returns rawURL with its secrets replaced by "xxxxx", for
// messages and logs: the password of its user information, and the value
// of every query parameter whose name ends in "password" (such as
// sentinel_password). Parameters that name where a secret is
// (password_file, password_env) are kept.
func RedactURL(rawURL string) string {
	out := rawURL
	if _, secret, at, ok := urlPassword(rawURL); ok {
		out = rawURL[:at-len(secret)] + "xxxxx" + rawURL[at:]
	}
	for _, p := range queryPasswords(out) {
		out = strings.Replace(out, p[0]+"="+p[1], p[0]+"=xxxxx", 1)
	}
	return out
}

// queryPasswords returns the name and value, as written, of the query
// parameters of rawURL whose names end in "password".
func queryPasswords(rawURL string) [][2]string {
	_, query, ok := strings.Cut(rawURL, "?")
	if !ok {
		return nil
	}
	query, _, _ = strings.Cut(query, "#")
	var ps [][2]string
	for kv := range strings.SplitSeq(query, "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		if uk, err := url.QueryUnescape(k); err == nil && strings.HasSuffix(strings.ToLower(uk), "password") {
			ps = append(ps, [2]string{k, v})
		}
	}
	return ps
}

// urlPassword finds the password of the user information of rawURL, as
// written and unescaped; at is the offset of the '@' that ends it.
func urlPassword(rawURL string) (plain, written string, at int, ok bool) {
	_, rest, found := strings.Cut(rawURL, "://")
	if !found {
		return "", "", 0, false
	}
	start := len(rawURL) - len(rest)
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	i := strings.LastIndexByte(rest, '@')
	if i < 0 {
		return "", "", 0, false
	}
	_, pass, has := strings.Cut(rest[:i], ":")
	if !has || pass == "" {
		return "", "", 0, false
	}
	plain, err := url.PathUnescape(pass)
	if err != nil {
		plain = pass
	}
	return plain, pass, start + i, true
}

// maskSecret returns err with the secrets of rawURL (see RedactURL) masked
// in its text, as written and unescaped; errors.Is and errors.As still see
// the causes.
func maskSecret(rawURL string, err error) error {
	var secrets []string
	if plain, written, _, ok := urlPassword(rawURL); ok {
		secrets = append(secrets, written, plain)
	}
	for _, p := range queryPasswords(rawURL) {
		secrets = append(secrets, p[1])
		if v, err := url.QueryUnescape(p[1]); err == nil {
			secrets = append(secrets, v)
		}
	}
	text := err.Error()
	var pairs []string
	for _, s := range secrets {
		if strings.Contains(text, s) {
			pairs = append(pairs, s, "xxxxx")
		}
	}
	if pairs == nil {
		return err
	}
	return &maskedError{err: err, r: strings.NewReplacer(pairs...)}
}

type maskedError struct {
	err error
	r   *strings.Replacer
}

func (e *maskedError) Error() string { return e.r.Replace(e.err.Error()) }
func (e *maskedError) Unwrap() error { return e.err }
