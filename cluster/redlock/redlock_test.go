package redlock

import (
	"strings"
	"testing"

	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/locktest"
)

func TestConformanceRedlock(t *testing.T) {
	var ss []*redistest.Server
	for range 5 {
		ss = append(ss, redistest.Start(t))
	}
	// Loaded CI machines answer slowly; the node timeout is raised to
	// TTL/10 so that a slow reply is not taken for a dead node.
	locktest.Run(t, suiteRedlock, redlockURL(ss, testQuery+"&node_timeout=200ms"))
}

func redlockURL(ss []*redistest.Server, query string) string {
	var hs []string
	for _, s := range ss {
		hs = append(hs, s.Addr())
	}
	u := "redlock://" + strings.Join(hs, ",")
	if query != "" {
		u += "?" + query
	}
	return u
}
