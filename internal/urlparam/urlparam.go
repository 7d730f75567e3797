// Package urlparam reads the query parameters that every network backend's
// URL shares besides the lease options: TLS material from files, and a
// password from a file or an environment variable, so that no secret has
// to be written in a URL (and so in argv, ps and logs).
package urlparam

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/batonlock/baton/internal/errs"
)

// The parameters Take reads.
const (
	CA           = "ca"            // PEM file of the certificate authorities to trust
	Cert         = "cert"          // PEM file of the client certificate (with key)
	Key          = "key"           // PEM file of the client certificate's private key
	PasswordFile = "password_file" // file whose content (less a final newline) is the password
	PasswordEnv  = "password_env"  // environment variable that holds the password
)

// Forms is the text that names the parameters in messages about URLs.
const Forms = "ca=FILE, cert=FILE&key=FILE, password_file=FILE or password_env=VAR"

// Common is what the shared parameters of one URL say.
type Common struct {
	roots *x509.CertPool
	certs []tls.Certificate

	Password    string // read from PasswordFile or PasswordEnv
	HasPassword bool   // PasswordFile or PasswordEnv was given
}

// HasTLS reports whether the URL gave a CA or a client certificate.
func (c Common) HasTLS() bool { return c.roots != nil || c.certs != nil }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: URL parameter "+format, append([]any{errs.InvalidArgument}, args...)...)
}

// Take reads the shared parameters of q, loads the files and the variable
// they name, and deletes them from q, so that what is left is the backend's
// own. A parameter given twice, a file that cannot be read or holds no PEM
// block of the kind wanted, cert without key (or the reverse), both
// password parameters, or a variable that is unset or empty is refused
// with an error matching baton.ErrInvalidArgument.
func Take(q url.Values) (Common, error) {
	var c Common
	given := make(map[string]string, 5)
	for _, name := range []string{CA, Cert, Key, PasswordFile, PasswordEnv} {
		vs, ok := q[name]
		if !ok {
			continue
		}
		delete(q, name)
		if len(vs) != 1 || vs[0] == "" {
			return c, invalid("%s must be given once, not empty", name)
		}
		given[name] = vs[0]
	}
	ca, hasCA := given[CA]
	cert, hasCert := given[Cert]
	key, hasKey := given[Key]
	pf, hasPF := given[PasswordFile]
	pe, hasPE := given[PasswordEnv]
	if hasCA {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return c, invalid("%s: %v", CA, err)
		}
		c.roots = x509.NewCertPool()
		if !c.roots.AppendCertsFromPEM(pem) {
			return c, invalid("%s: %s holds no PEM certificate", CA, ca)
		}
	}
	if hasCert != hasKey {
		return c, invalid("%s and %s go together", Cert, Key)
	}
	if hasCert {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return c, invalid("%s, %s: %v", Cert, Key, err)
		}
		c.certs = []tls.Certificate{pair}
	}
	switch {
	case hasPF && hasPE:
		return c, invalid("%s and %s exclude each other", PasswordFile, PasswordEnv)
	case hasPF:
		b, err := os.ReadFile(pf)
		if err != nil {
			return c, invalid("%s: %v", PasswordFile, err)
		}
		c.Password = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		c.HasPassword = true
	case hasPE:
		v, ok := os.LookupEnv(pe)
		if !ok || v == "" {
			return c, invalid("%s: the environment variable %s is unset or empty", PasswordEnv, pe)
		}
		c.Password, c.HasPassword = v, true
	}
	return c, nil
}

// Secret reads the secret parameter name of q, given as its value
// (name=VALUE) or by reference (name_file=FILE, name_env=VAR, read as
// PasswordFile and PasswordEnv are), at most one of the three, and deletes
// them from q. ok is false when none is given.
func Secret(q url.Values, name string) (v string, ok bool, err error) {
	file, env := name+"_file", name+"_env"
	n := 0
	for _, k := range []string{name, file, env} {
		if q.Has(k) {
			n++
		}
	}
	switch {
	case n == 0:
		return "", false, nil
	case n > 1:
		return "", false, invalid("%s, %s and %s exclude each other", name, file, env)
	}
	if vs, has := q[name]; has {
		delete(q, name)
		if len(vs) != 1 {
			return "", false, invalid("%s must be given once", name)
		}
		return vs[0], true, nil
	}
	sub := url.Values{PasswordFile: q[file], PasswordEnv: q[env]}
	for k, vs := range sub {
		if vs == nil {
			delete(sub, k)
		}
	}
	delete(q, file)
	delete(q, env)
	c, err := Take(sub)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", name, err)
	}
	return c.Password, true, nil
}

// PasswordOr returns the password to use: the one of the parameters, else
// inline (the URL's user information) when hasInline. A password given both
// ways is refused.
func (c Common) PasswordOr(inline string, hasInline bool) (string, error) {
	if c.HasPassword && hasInline {
		return "", invalid("%s/%s given with a password in the URL", PasswordFile, PasswordEnv)
	}
	if c.HasPassword {
		return c.Password, nil
	}
	return inline, nil
}

// TLSConfig returns base (a new config when base is nil) with the URL's
// trusted CAs and client certificate; serverName is set when base has none.
func (c Common) TLSConfig(base *tls.Config, serverName string) *tls.Config {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		t = base.Clone()
	}
	if c.roots != nil {
		t.RootCAs = c.roots
	}
	if c.certs != nil {
		t.Certificates = c.certs
	}
	if t.ServerName == "" {
		t.ServerName = serverName
	}
	return t
}

// NoTLS is the error for TLS parameters on a scheme without TLS.
func NoTLS(scheme, tlsScheme string) error {
	return invalid("%s, %s and %s need TLS: use %s:// rather than %s://", CA, Cert, Key, tlsScheme, scheme)
}

// Query parses the query of a URL. A query that does not parse (a bad
// escape such as %zz, a ';') is refused with an error matching
// baton.ErrInvalidArgument: net/url's URL.Query drops such a pair without a
// word, so that a parameter the user wrote would silently not apply.
func Query(rawQuery string) (url.Values, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: URL query: %v", errs.InvalidArgument, err)
	}
	return q, nil
}

// HostPort checks one host of a URL, host[:port]: a name, an IPv4 address
// or a bracketed IPv6 one, and a port in 1..65535. It returns the host (IPv6
// without brackets) and the port, defaultPort when none is written. A bad
// one is refused with an error matching baton.ErrInvalidArgument, so that a
// URL fails as written rather than at the dial.
func HostPort(hostport, defaultPort string) (host, port string, err error) {
	bad := func(what string) (string, string, error) {
		return "", "", fmt.Errorf("%w: URL host %q: %s", errs.InvalidArgument, hostport, what)
	}
	host, port, err = net.SplitHostPort(hostport)
	if err != nil {
		// No port: a name, an IPv4 address or a bracketed IPv6 one.
		switch {
		case strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]"):
			host = hostport[1 : len(hostport)-1]
		case !strings.ContainsAny(hostport, ":[]"):
			host = hostport
		default:
			return bad("not host, host:port or [ipv6]:port")
		}
		port = defaultPort
	}
	if host == "" {
		return bad("no host")
	}
	if strings.ContainsAny(host, "[]@/?#, \t\r\n\x00") {
		return bad("not a host name or address")
	}
	if (strings.Contains(host, ":") || strings.HasPrefix(hostport, "[")) && !isIP(host) {
		return bad("not an IPv6 address")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return bad("the port must be a number in 1..65535")
	}
	return host, port, nil
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
