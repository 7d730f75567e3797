package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/locktest"
)

func openCfg(cfg string) (baton.Backend, error) { return OpenURL(context.Background(), cfg) }

var (
	suiteSingle = locktest.Suite{Name: "redis", Open: openCfg, KillSession: killSession, Caps: locktest.Caps{
		RWMutex: true, Semaphore: true, Cond: true, Value: true, Queue: true, CrossProcess: true,
		KillBound: 6 * time.Second, Acquisitions: 3000, Lease: true}, Reclaim: reclaim}
	suiteCluster = locktest.Suite{Name: "redis-cluster", Open: openCfg, KillSession: killSession, Caps: locktest.Caps{
		RWMutex: true, Semaphore: true, Cond: true, Value: true, Queue: true, CrossProcess: true,
		KillBound: 6 * time.Second, Acquisitions: 2000, Lease: true}, Reclaim: reclaim}
)

// reclaim: a name's token counter goes a TTL (testQuery's 2 s) after its
// last grant, its other keys a second after the last lease or queue entry.
// After is that TTL, so that the race test's names come back just as their
// counters expire.
var reclaim = &locktest.Reclaim{
	Residue: func(cfg string) (int, error) { return redistest.Residue(cfg, DefaultPrefix) },
	After:   2 * time.Second,
}

func TestMain(m *testing.M) { locktest.Main(m, suiteSingle, suiteCluster) }

// Leases of 2 s keep the kill test short and survive a loaded -race run.
const testQuery = "ttl=2s"

func TestConformanceSingle(t *testing.T) {
	s := startRedis(t)
	locktest.Run(t, suiteSingle, s.URL(testQuery))
}

func TestConformanceCluster(t *testing.T) {
	ss := startCluster(t, 3)
	locktest.Run(t, suiteCluster, clusterURL(ss, testQuery))
}

func TestEscapeInjective(t *testing.T) {
	names := []string{"a", "{a}", "%7Ba%7D", "%", "%25", "a}b", "a{b", "{", "}", "x/y", "%7B"}
	seen := map[string]string{}
	for _, n := range names {
		k := redisnode.KeyBase("p:", kmutex, n)
		if prev, ok := seen[k]; ok {
			t.Fatalf("names %q and %q map to one key %q", prev, n, k)
		}
		seen[k] = n
		if got := redisnode.UnescapeName(redisnode.EscapeName(n)); got != n {
			t.Fatalf("unescape(escape(%q)) = %q", n, got)
		}
		// The hash tag is the whole escaped name: exactly one '{' and one '}'.
		if c := countRune(k, '{') + countRune(k, '}'); c != 2 {
			t.Fatalf("key %q of %q has %d braces", k, n, c)
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"a", "{}", "%7B", "%%"} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a != b && redisnode.EscapeName(a) == redisnode.EscapeName(b) {
			t.Fatalf("%q and %q escape alike", a, b)
		}
		if redisnode.UnescapeName(redisnode.EscapeName(a)) != a {
			t.Fatalf("round trip of %q", a)
		}
	})
}

func countRune(s string, r rune) int {
	n := 0
	for _, c := range s {
		if c == r {
			n++
		}
	}
	return n
}

func TestOptionsValidation(t *testing.T) {
	bad := [][]lease.Option{
		{lease.WithTTL(time.Second), lease.WithRenewEvery(600 * time.Millisecond)},
		{lease.WithTTL(-time.Second)},
		{lease.WithTTL(time.Millisecond)},
		{lease.WithPrefix("a{b")},
		{lease.WithPrefix("a}")},
		{lease.WithDrift(-1)},
		{lease.WithTTL(time.Second), lease.WithDrift(900 * time.Millisecond)},
		{nil},
	}
	for i, opts := range bad {
		if _, err := buildOptions(opts); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("case %d: err %v, want ErrInvalidArgument", i, err)
		}
	}
	o, err := buildOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.TTL != 10*time.Second || o.RenewEvery != 10*time.Second/3 || o.Prefix != DefaultPrefix ||
		o.Drift != 102*time.Millisecond {
		t.Fatalf("defaults: %+v", o)
	}
}

func TestOpenURLRefuses(t *testing.T) {
	for _, u := range []string{
		"http://127.0.0.1:1", "etcd://x", "redlock://127.0.0.1:1,127.0.0.1:2", "redis+cluster://a:1,,b:2",
		"redis://127.0.0.1:1?ttl=banana", "redis://127.0.0.1:1?ttl=1s&renew_every=900ms", "::", "redis://127.0.0.1:1?prefix=%7B",
		"redis://127.0.0.1:1?node_timeout=10ms", "redis://127.0.0.1:1?ttl=1s&ttl=2s",
	} {
		b, err := OpenURL(context.Background(), u)
		if !errors.Is(err, baton.ErrInvalidArgument) {
			if b != nil {
				b.Close()
			}
			t.Errorf("OpenURL(%q): err %v, want ErrInvalidArgument", u, err)
		}
	}
	_, err := OpenURL(context.Background(), "memcached://x")
	if err == nil || !contains(err.Error(), "redis+cluster://") || !contains(err.Error(), "redlock://") {
		t.Fatalf("error does not name the accepted forms: %v", err)
	}
}

func contains(s, sub string) bool { return len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0) }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
