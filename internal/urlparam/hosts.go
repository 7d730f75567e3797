package urlparam

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Hosts is what a URL of the form
// scheme://[user[:password]@]host[:port][,host[:port]...][/path][?query]
// says, the form of the backends that take a list of servers (etcd,
// ZooKeeper).
type Hosts struct {
	TLS         bool     // the URL has the TLS scheme
	User        string   // unescaped; "" without user information
	Password    string   // unescaped
	HasPassword bool     // user:password@, the password possibly empty
	Addrs       []string // host:port, the default port where none is written
	Path        string   // unescaped, without the leading '/'; "" when none
	Query       url.Values
}

// ParseHosts reads raw, whose scheme must be plain or secure (the TLS one),
// matched without regard to case. Its errors name what is wrong, bare
// (a backend's parser adds the URL and its accepted forms); a bad host or
// query matches baton.ErrInvalidArgument.
func ParseHosts(raw, plain, secure, defaultPort string) (Hosts, error) {
	var h Hosts
	scheme, rest, ok := strings.Cut(raw, "://")
	switch {
	case !ok:
		return Hosts{}, errors.New("no scheme")
	case strings.EqualFold(scheme, plain):
	case strings.EqualFold(scheme, secure):
		h.TLS = true
	default:
		return Hosts{}, errors.New("scheme " + strconv.Quote(scheme))
	}
	if strings.Contains(rest, "#") {
		return Hosts{}, errors.New("fragment")
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(hosts, '@'); at >= 0 {
		user, pass, withPass := strings.Cut(hosts[:at], ":")
		var err error
		if h.User, err = url.PathUnescape(user); err != nil || h.User == "" {
			return Hosts{}, errors.New("user name")
		}
		if withPass {
			if h.Password, err = url.PathUnescape(pass); err != nil {
				return Hosts{}, errors.New("password")
			}
			h.HasPassword = true
		}
		hosts = hosts[at+1:]
	}
	for one := range strings.SplitSeq(hosts, ",") {
		host, port, err := HostPort(one, defaultPort)
		if err != nil {
			return Hosts{}, err
		}
		h.Addrs = append(h.Addrs, net.JoinHostPort(host, port))
	}
	if path != "" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return Hosts{}, errors.New("path " + strconv.Quote(path))
		}
		h.Path = p
	}
	q, err := Query(rawQuery)
	if err != nil {
		return Hosts{}, err
	}
	h.Query = q
	return h, nil
}
