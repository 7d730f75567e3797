package etcdlock

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		url    string
		eps    []string
		tls    bool
		user   string
		pass   string
		prefix string
	}{
		{"etcd://127.0.0.1:2379", []string{"127.0.0.1:2379"}, false, "", "", ""},
		{"etcd://h1:1,h2:2", []string{"h1:1", "h2:2"}, false, "", "", ""},
		{"etcd://h1", []string{"h1:2379"}, false, "", "", ""},
		{"ETCDS://[::1]:3000", []string{"[::1]:3000"}, true, "", "", ""},
		{"etcd://[::1]", []string{"[::1]:2379"}, false, "", "", ""},
		{"etcd://u:p%40ss@h:1/app", []string{"h:1"}, false, "u", "p@ss", "app/"},
		{"etcd://h:1/a/b/", []string{"h:1"}, false, "", "", "a/b/"},
	}
	for _, g := range good {
		got, err := parseURL(g.url)
		if err != nil {
			t.Errorf("parseURL(%q): %v", g.url, err)
			continue
		}
		if !slices.Equal(got.endpoints, g.eps) || got.tls != g.tls || got.username != g.user || got.password != g.pass || got.prefix != g.prefix {
			t.Errorf("parseURL(%q) = %+v", g.url, got)
		}
	}
	bad := []string{
		"", "127.0.0.1:2379", "redis://h:1", "http://h:1", "etcd://", "etcd://h:0", "etcd://h:65536",
		"etcd://h:x", "etcd://h1,,h2", "etcd://h?x=1", "etcd://h#f", "etcd://@h", "etcd://a b:1",
		"etcd://h:1/%zz", "etcd://[::1:2379", "etcd://h:99999", "etcd://h:1?ttl=0s", "etcd://h:1,h:-1",
		"etcd://h:1?ttl=1500ms", "etcd://h:1?ttl=5s&ttl=6s", "etcd://h:1?ttl=x", "etcd://h:1?node_timeout=1s",
		"etcd://h:1?dial_timeout=0s", "etcd://h:1/a?prefix=b", "etcd://h:1?prefix=", "etcd://h:1?x=%zz",
		"etcd://h:1/" + strings.Repeat("p", 100),
	}
	for _, u := range bad {
		_, err := parseURL(u)
		if !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("parseURL(%q): %v, want ErrInvalidArgument", u, err)
		} else if !strings.Contains(err.Error(), "etcd://host:port") {
			t.Errorf("parseURL(%q): error does not name the accepted forms: %v", u, err)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"etcd://h:1,h2:2/p", "etcds://u:p@[::1]:5/x", "etcd://h", "x://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseURL(s)
		if err != nil {
			if !errors.Is(err, baton.ErrInvalidArgument) {
				t.Fatalf("parseURL(%q): %v does not match ErrInvalidArgument", s, err)
			}
			return
		}
		if len(got.endpoints) == 0 {
			t.Fatalf("parseURL(%q): no endpoints", s)
		}
		for _, ep := range got.endpoints {
			if _, _, err := net.SplitHostPort(ep); err != nil {
				t.Fatalf("parseURL(%q): endpoint %q: %v", s, ep, err)
			}
		}
		if got.prefix != "" && !strings.HasSuffix(got.prefix, "/") {
			t.Fatalf("parseURL(%q): prefix %q", s, got.prefix)
		}
	})
}

func TestOptions(t *testing.T) {
	o, err := buildOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.ttl != lease.DefaultTTL || o.renewal != lease.DefaultTTL/lease.DefaultRenewDivisor || o.drift != lease.DefaultDrift(lease.DefaultTTL) ||
		o.requestTimeout != lease.DefaultRequestTimeout || o.dialTimeout != DefaultDialTimeout || o.prefix != DefaultPrefix || o.log == nil {
		t.Errorf("defaults %+v", o)
	}
	o, err = buildOptions([]lease.Option{lease.WithTTL(4 * time.Second), lease.WithRenewEvery(time.Second), lease.WithDrift(time.Millisecond),
		lease.WithPrefix("app"), WithDialTimeout(time.Second), lease.WithRequestTimeout(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if o.ttl != 4*time.Second || o.renewal != time.Second || o.drift != time.Millisecond || o.prefix != "app/" ||
		o.dialTimeout != time.Second || o.requestTimeout != 2*time.Second {
		t.Errorf("options not applied: %+v", o)
	}
	bad := [][]lease.Option{
		{lease.WithTTL(0)}, {lease.WithTTL(500 * time.Millisecond)}, {lease.WithTTL(2500 * time.Millisecond)},
		{lease.WithRenewEvery(0)}, {lease.WithRenewEvery(-time.Second)},
		{lease.WithTTL(4 * time.Second), lease.WithRenewEvery(3 * time.Second)},
		{lease.WithTTL(4 * time.Second), lease.WithRenewEvery(time.Second), lease.WithDrift(3500 * time.Millisecond)},
		{lease.WithDrift(-1)}, {WithDialTimeout(0)}, {WithDialTimeout(-1)}, {lease.WithRequestTimeout(0)}, {lease.WithRequestTimeout(-1)},
		{lease.WithPrefix("")}, {lease.WithPrefix("a\x00b")}, {lease.WithPrefix(strings.Repeat("p", 300))}, {WithTLS(nil)}, {nil},
		{lease.NewKey[int]("another backend's option").Option(1)},
	}
	for i, opts := range bad {
		if _, err := buildOptions(opts); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("options %d: %v, want ErrInvalidArgument", i, err)
		}
	}
	if _, err := New(nil); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
	ctx := context.Background()
	// Refused before any connection: nothing listens on these.
	if _, err := OpenURL(ctx, "etcd://127.0.0.1:1", WithTLS(&tls.Config{})); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("WithTLS with etcd://: %v", err)
	}
	if _, err := OpenURL(ctx, "etcd://127.0.0.1:1?ttl=4s", lease.WithRenewEvery(3*time.Second)); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("URL and options that do not fit together: %v", err)
	}
	if _, err := OpenURL(ctx, "mysql://127.0.0.1:1"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("other scheme: %v", err)
	}
	// Nothing listens: OpenURL fails within the dial timeout, of the
	// options or of the URL.
	for _, u := range []string{"etcd://127.0.0.1:1", "etcd://127.0.0.1:1?dial_timeout=300ms"} {
		var opts []lease.Option
		if !strings.Contains(u, "?") {
			opts = append(opts, WithDialTimeout(300*time.Millisecond))
		}
		start := time.Now()
		if _, err := OpenURL(ctx, u, opts...); err == nil {
			t.Errorf("OpenURL of a closed port succeeded")
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("OpenURL(%q) of a closed port took %v", u, d)
		}
	}
}

// The URL's query sets the options by the lease package's parameters; the
// options given to OpenURL come after them.
func TestURLOptions(t *testing.T) {
	tg, err := parseURL("etcd://h:1/app?ttl=4s&renew_every=1s&drift=5ms&request_timeout=2s&dial_timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	o, err := buildOptions(tg.opts)
	if err != nil {
		t.Fatal(err)
	}
	if o.ttl != 4*time.Second || o.renewal != time.Second || o.drift != 5*time.Millisecond || o.requestTimeout != 2*time.Second ||
		o.dialTimeout != 3*time.Second || o.prefix != "app/" {
		t.Errorf("URL options: %+v", o)
	}
	o, err = buildOptions(append(tg.opts, lease.WithTTL(6*time.Second), lease.WithPrefix("other")))
	if err != nil {
		t.Fatal(err)
	}
	if o.ttl != 6*time.Second || o.prefix != "other/" {
		t.Errorf("options after the URL's: %+v", o)
	}
	tg, err = parseURL("etcd://h:1?prefix=q")
	if err != nil {
		t.Fatal(err)
	}
	if o, err = buildOptions(tg.opts); err != nil || o.prefix != "q/" {
		t.Errorf("prefix parameter: %+v, %v", o, err)
	}
}

func TestNameEncoding(t *testing.T) {
	names := []string{"a", "a/b", "a%2Fb", "a%b", "%", "/", "%25"}
	seen := map[string]string{}
	for _, n := range names {
		e := encodeName(n)
		if strings.Contains(e, "/") {
			t.Errorf("encodeName(%q) = %q has a '/'", n, e)
		}
		if other, ok := seen[e]; ok {
			t.Errorf("encodeName(%q) = encodeName(%q) = %q", n, other, e)
		}
		seen[e] = n
		if d := decodeName(e); d != n {
			t.Errorf("decodeName(encodeName(%q)) = %q", n, d)
		}
	}
}
