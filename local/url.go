package local

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/batonlock/baton"
)

// urlForms names the URLs of OpenURL in messages.
const urlForms = "local: (the default namespace), local:///DIR or file:///DIR (DIR absolute)"

func init() {
	baton.Register("local", openURL)
	baton.Register("file", openURL)
}

func openURL(ctx context.Context, rawURL string) (baton.Backend, error) { return OpenURL(rawURL) }

// OpenURL opens the Backend over the namespace directory that rawURL names:
// "local:" for the default one (see ipc.DefaultDir), "local:///DIR" or
// "file:///DIR" for DIR. A URL takes no query, user or fragment, and its
// host, if any, is localhost; anything else is refused with an error
// matching baton.ErrInvalidArgument, creating nothing.
func OpenURL(rawURL string) (baton.Backend, error) {
	dir, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return Open(dir)
}

// ParseURL returns the namespace directory of a local: or file: URL, ""
// for the default one, cleaned. It checks what OpenURL checks and creates
// nothing.
func ParseURL(rawURL string) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: local: URL %q: "+format+"; accepted: %s",
			append(append([]any{baton.ErrInvalidArgument, rawURL}, args...), urlForms)...)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return bad("%v", err)
	}
	s := strings.ToLower(u.Scheme)
	switch {
	case s != "local" && s != "file":
		return bad("scheme %q", u.Scheme)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil:
		return bad("a local URL takes no query, fragment or user")
	case u.Host != "" && u.Host != "localhost":
		return bad("host %q, a local URL names a directory of this host", u.Host)
	case u.Opaque != "":
		return bad("the directory must be absolute (local:///DIR)")
	case u.Path == "" && s == "file":
		return bad("no directory")
	case u.Path == "":
		return "", nil
	case !filepath.IsAbs(u.Path):
		return bad("the directory must be absolute")
	}
	return filepath.Clean(u.Path), nil
}
