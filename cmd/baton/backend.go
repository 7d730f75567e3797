package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local"
	"github.com/spf13/cobra"

	// The backends whose URLs baton.Open accepts.
	_ "github.com/batonlock/baton/cluster/etcdlock"
	_ "github.com/batonlock/baton/cluster/mysqllock"
	_ "github.com/batonlock/baton/cluster/pglock"
	_ "github.com/batonlock/baton/cluster/redislock"
	_ "github.com/batonlock/baton/cluster/redlock"
	_ "github.com/batonlock/baton/cluster/zklock"
)

// acceptedSchemes is named in every message about a bad backend URL: the
// schemes of the backends this program links, as their packages registered
// them; baton --help gives the form of each URL.
func acceptedSchemes() string {
	return strings.Join(baton.Schemes(), ", ") + " (baton --help shows their forms)"
}

// childPasswordEnv is the variable that carries a password written in the
// backend URL to the command, so that its BATON_BACKEND shows none.
const childPasswordEnv = "BATON_BACKEND_PASSWORD"

// backendOptions are the command-line settings a backend may use.
type backendOptions struct {
	ttl time.Duration // lease TTL; 0 for the backend's default; ignored by local
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

// isLocal reports whether raw is a same-host URL.
func isLocal(raw string) bool {
	scheme, _, _ := strings.Cut(raw, ":")
	return strings.EqualFold(scheme, "local") || strings.EqualFold(scheme, "file")
}

// checkBackendURL validates the scheme of raw (and all of a local URL)
// without side effects.
func checkBackendURL(raw string) error {
	scheme, _, ok := strings.Cut(raw, ":")
	if !ok || scheme == "" {
		return usageErrorf("backend URL %q has no scheme; accepted: %s", baton.RedactURL(raw), acceptedSchemes())
	}
	if !slices.Contains(baton.Schemes(), strings.ToLower(scheme)) {
		return usageErrorf("backend URL scheme %q is not known; accepted: %s", scheme, acceptedSchemes())
	}
	if isLocal(raw) {
		if _, err := local.ParseURL(raw); err != nil {
			return usageErrorf("backend %s", strings.TrimPrefix(err.Error(), baton.ErrInvalidArgument.Error()+": "))
		}
	}
	return nil
}

// openBackend opens the backend named by raw with baton.Open. A malformed
// URL is a usage error (exit 64); a backend that cannot be reached is exit
// 70.
func openBackend(ctx context.Context, raw string, o backendOptions) (baton.Backend, error) {
	if err := checkBackendURL(raw); err != nil {
		return nil, err
	}
	u := raw
	if o.ttl > 0 && !isLocal(raw) {
		u = withParam(raw, "ttl", o.ttl.String())
	}
	b, err := baton.Open(ctx, u)
	if err != nil {
		msg := openCause(raw, err)
		if errors.Is(err, baton.ErrInvalidArgument) {
			// The exit code says that the argument is invalid; the
			// message says what is wrong with it.
			if strings.Contains(msg, baton.RedactURL(raw)) {
				return nil, usageErrorf("backend %s", msg) // the message quotes the URL already
			}
			return nil, usageErrorf("backend URL %s: %s", baton.RedactURL(raw), msg)
		}
		return nil, exitWith(exitBackend, fmt.Errorf("backend %s: %s%w", baton.RedactURL(raw), msg, silent{err}))
	}
	return b, nil
}

// backendLabel is the label a backend package puts before its own errors.
var backendLabel = regexp.MustCompile(`^(redislock|redlock|etcdlock|pglock|mysqllock|zklock|local): `)

// openCause is the text of an error of baton.Open for a message that names
// the backend's URL already: without the "baton: " of the sentinels, the
// backend package's label, the words of ErrInvalidArgument (the exit code
// says it), and a leading address that the URL shows.
func openCause(raw string, err error) string {
	msg := backendLabel.ReplaceAllString(errText(err), "")
	inv := strings.TrimPrefix(baton.ErrInvalidArgument.Error(), "baton: ")
	msg = strings.TrimSuffix(strings.ReplaceAll(msg, inv+": ", ""), ": "+inv)
	if addr, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(addr, " \"") && strings.Contains(raw, addr) {
		msg = rest
	}
	return msg
}

// silent wraps an error for errors.Is and errors.As without adding to the
// text of the error that holds it.
type silent struct{ err error }

func (s silent) Error() string { return "" }
func (s silent) Unwrap() error { return s.err }

// errText is the text of err for a message of baton's own, without the
// "baton: " that the sentinels' texts start with.
func errText(err error) string {
	return strings.TrimPrefix(strings.ReplaceAll(err.Error(), ": baton: ", ": "), "baton: ")
}

// withParam returns raw with the query parameter name set to value,
// leaving the rest of the URL as written.
func withParam(raw, name, value string) string {
	rest, frag, hasFrag := strings.Cut(raw, "#")
	base, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return raw // the backend reports the bad query
	}
	q.Set(name, value)
	out := base + "?" + q.Encode()
	if hasFrag {
		out += "#" + frag
	}
	return out
}

// childBackend returns the BATON_BACKEND given to the command: the URL
// baton used, with the default local namespace spelled out, and with every
// secret written in it (the password of the user information, a query
// parameter named ...password) moved to a variable of its own (returned in
// env) that the URL names by NAME_env (password_env, sentinel_password_env).
// So the command reconnects to the same backend, and its URL shows no
// secret.
func childBackend(raw string) (u string, env []string) {
	if isLocal(raw) {
		if dir, err := local.ParseURL(raw); err == nil && dir == "" {
			return "local://" + ipc.DefaultDir(), nil
		}
		return raw, nil
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw, nil
	}
	u = raw
	auth := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth = rest[:i]
	}
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		if user, pass, hasPass := strings.Cut(auth[:at], ":"); hasPass {
			if p, err := url.PathUnescape(pass); err == nil {
				pass = p
			}
			u = withParam(scheme+"://"+user+rest[at:], "password_env", childPasswordEnv)
			env = append(env, childPasswordEnv+"="+pass)
		}
	}
	head, frag, hasFrag := strings.Cut(u, "#")
	base, query, hasQuery := strings.Cut(head, "?")
	q, err := url.ParseQuery(query)
	if !hasQuery || err != nil {
		return u, env
	}
	moved := false
	for k, vs := range q {
		if !strings.HasSuffix(strings.ToLower(k), "password") || len(vs) != 1 {
			continue
		}
		name := "BATON_BACKEND_" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' {
				return r - 'a' + 'A'
			}
			if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, k)
		q.Del(k)
		q.Set(k+"_env", name)
		env = append(env, name+"="+vs[0])
		moved = true
	}
	if !moved {
		return u, env
	}
	u = base + "?" + q.Encode()
	if hasFrag {
		u += "#" + frag
	}
	return u, env
}
