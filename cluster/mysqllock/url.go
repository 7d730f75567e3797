package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/urlparam"
	"github.com/go-sql-driver/mysql"
)

// URL forms accepted by OpenURL.
const urlForms = "mysql://[user[:pass]@]host[:port]/database[?opts], mysql+unix://[user[:pass]@]/path/to/socket?db=database"

// OpenURL opens a Backend on the server and database that rawURL names:
//
//	mysql://[user[:pass]@]host[:port]/database[?opts]
//	mysql+unix://[user[:pass]@]/path/to/socket?db=database[&opts]
//
// The query may set the lease options (ttl, renew_every, drift,
// request_timeout, prefix; see package lease); any other parameter is
// passed to go-sql-driver as a DSN parameter (tls, timeout,
// readTimeout, ...), except the TLS files and password references that
// every network URL takes: ca, cert and key (PEM files; TLS is then on)
// and password_file or password_env. opts given to OpenURL take precedence.
// Its connections interpolate arguments and take several statements per
// request (interpolateParams and multiStatements, unless the URL sets
// them): a queue's Put and Claim then cost fewer round trips. The pool it
// creates is closed with the Backend. A malformed URL returns an error
// matching baton.ErrInvalidArgument before any connection is made.
func OpenURL(ctx context.Context, rawURL string, opts ...lease.Option) (baton.Backend, error) {
	cfg, lopts, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	opts = append(lopts, opts...)
	if _, err := lease.Build(lease.Spec{Prefix: DefaultPrefix}, opts); err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", baton.ErrInvalidArgument, err)
	}
	db := sql.OpenDB(conn)
	d, err := newBackend(ctx, db, opts, true)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("mysqllock: %s: %w", cfg.Addr, err)
	}
	return baton.NewBackend(d), nil
}

func badURL(format string, args ...any) error {
	return fmt.Errorf("%w: URL: "+format+" (accepted: "+urlForms+")", append([]any{baton.ErrInvalidArgument}, args...)...)
}

// parseURL turns rawURL into a driver configuration and the lease options
// of its query.
func parseURL(rawURL string) (*mysql.Config, []lease.Option, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, badURL("%v", err)
	}
	q, err := urlparam.Query(u.RawQuery)
	if err != nil {
		return nil, nil, badURL("%v", err)
	}
	lopts, err := lease.FromQuery(q)
	if err != nil {
		return nil, nil, err
	}
	sec, err := urlparam.Take(q)
	if err != nil {
		return nil, nil, err
	}
	if sec.HasTLS() && q.Has("tls") {
		return nil, nil, badURL("both tls and %s/%s/%s", urlparam.CA, urlparam.Cert, urlparam.Key)
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	switch strings.ToLower(u.Scheme) {
	case "mysql":
		if u.Host == "" {
			return nil, nil, badURL("no host")
		}
		host, port, err := urlparam.HostPort(u.Host, "3306")
		if err != nil {
			return nil, nil, badURL("%v", err)
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
		cfg.DBName = strings.TrimPrefix(u.Path, "/")
	case "mysql+unix":
		if u.Host != "" || u.Path == "" {
			return nil, nil, badURL("a socket URL names a path and no host")
		}
		cfg.Net, cfg.Addr = "unix", u.Path
		cfg.DBName = q.Get("db")
		q.Del("db")
	default:
		return nil, nil, badURL("scheme %q", u.Scheme)
	}
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return nil, nil, badURL("database name %q", cfg.DBName)
	}
	if u.Fragment != "" {
		return nil, nil, badURL("a fragment")
	}
	// The remaining parameters are the driver's, in its own DSN syntax.
	if len(q) > 0 {
		dsn := cfg.FormatDSN()
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		parsed, err := mysql.ParseDSN(dsn + sep + q.Encode())
		if err != nil {
			return nil, nil, badURL("%v", err)
		}
		cfg = parsed
	}
	// One round trip per statement with arguments, rather than a
	// prepare, an execution and a close.
	if !q.Has("interpolateParams") {
		cfg.InterpolateParams = true
	}
	// The statements of a queue's transaction in one request
	// (queue_multi.go); every argument is still escaped by the driver.
	if !q.Has("multiStatements") {
		cfg.MultiStatements = true
	}
	var inline string
	hasInline := false
	if u.User != nil {
		inline, hasInline = u.User.Password()
	}
	if cfg.Passwd, err = sec.PasswordOr(inline, hasInline); err != nil {
		return nil, nil, err
	}
	if sec.HasTLS() {
		// The driver names the server's host in the TLS handshake.
		cfg.TLS = sec.TLSConfig(nil, "")
	}
	return cfg, lopts, nil
}
