package pglock

import (
	"os"
	"strconv"
	"strings"

	"github.com/batonlock/baton"
)

// A holder is named by its client process the way the other backends name
// it, (pid, host), through its session's application_name, which the
// server shows to every session (pg_stat_activity). The server cuts the
// name at 63 bytes: a host name that does not fit is left out, and the
// client address stands in for it.
const (
	appPrefix = "baton "
	appMaxLen = 63
)

// ApplicationName returns the application_name that names this process as
// a holder in Inspect (baton status): "baton <pid>@<host>". OpenURL sets
// it on its connections unless the URL sets application_name; give it to
// the pool of New (its ConnConfig.RuntimeParams) for the same.
func ApplicationName() string {
	n := appPrefix + strconv.Itoa(os.Getpid())
	if h, err := os.Hostname(); err == nil && h != "" && len(n)+1+len(h) <= appMaxLen {
		n += "@" + h
	}
	return n
}

// holderOf returns the Holder of a session: the client's pid and host when
// its application_name is one of ApplicationName's; otherwise only the
// client address, with the session's server process as its Owner.
func holderOf(pid int, addr, app string) baton.Holder {
	if rest, ok := strings.CutPrefix(app, appPrefix); ok {
		p, host, _ := strings.Cut(rest, "@")
		if n, err := strconv.Atoi(p); err == nil && n > 0 {
			if host == "" {
				host = addr
			}
			return baton.Holder{PID: n, Host: host, Owner: sessionOwner(pid)}
		}
	}
	return baton.Holder{Host: addr, Owner: sessionOwner(pid)}
}

// sessionOwner names a server session by its process id, which
// pg_terminate_backend takes.
func sessionOwner(pid int) string { return "session " + strconv.Itoa(pid) }
