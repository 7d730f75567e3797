package urlparam

import (
	"errors"
	"slices"
	"testing"

	"github.com/batonlock/baton/internal/errs"
)

func TestParseHosts(t *testing.T) {
	h, err := ParseHosts("ZKS://us%40r:p%3Ass@h1,[::1]:2182,10.0.0.1:9/app%2Fx?ttl=5s&a=1", "zk", "zks", "2181")
	if err != nil {
		t.Fatal(err)
	}
	want := Hosts{TLS: true, User: "us@r", Password: "p:ss", HasPassword: true,
		Addrs: []string{"h1:2181", "[::1]:2182", "10.0.0.1:9"}, Path: "app/x"}
	if h.TLS != want.TLS || h.User != want.User || h.Password != want.Password || h.HasPassword != want.HasPassword ||
		!slices.Equal(h.Addrs, want.Addrs) || h.Path != want.Path || h.Query.Get("ttl") != "5s" || h.Query.Get("a") != "1" {
		t.Errorf("ParseHosts = %+v, want %+v and the query", h, want)
	}
	if h, err := ParseHosts("etcd://u@h", "etcd", "etcds", "2379"); err != nil || h.HasPassword || h.User != "u" || h.TLS {
		t.Errorf("a user without a password: %+v, %v", h, err)
	}
	for raw, invalid := range map[string]bool{
		"zk:/h":            false, // no scheme separator
		"http://h":         false,
		"zk://h#frag":      false,
		"zk://@h":          false,
		"zk://u:%zz@h":     false,
		"zk://h/%zz":       false,
		"zk://h:99999":     true,
		"zk://h,,h2":       true,
		"zk://h?x=%zz":     true,
		"zk://h1:2181,h 2": true,
	} {
		_, err := ParseHosts(raw, "zk", "zks", "2181")
		if err == nil || errors.Is(err, errs.InvalidArgument) != invalid {
			t.Errorf("ParseHosts(%q) = %v; want an error (matching ErrInvalidArgument: %v)", raw, err, invalid)
		}
	}
}
