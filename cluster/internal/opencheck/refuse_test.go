package opencheck

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	_ "github.com/batonlock/baton/cluster/etcdlock"
	_ "github.com/batonlock/baton/cluster/mysqllock"
	_ "github.com/batonlock/baton/cluster/pglock"
	_ "github.com/batonlock/baton/cluster/redislock"
	_ "github.com/batonlock/baton/cluster/redlock"
	_ "github.com/batonlock/baton/cluster/zklock"
)

// listener accepts on a loopback port and counts the connections, which it
// closes at once; it returns the port's address and the count.
func listener(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String(), &n
}

// urls returns a URL of every network scheme whose hosts are all addr,
// with query appended.
func urls(addr, query string) []string {
	three := addr + "," + addr + "," + addr
	return []string{
		"redis://" + addr + "/0?" + query,
		"rediss://" + addr + "?" + query,
		"redis+cluster://" + addr + "?" + query,
		"redis+sentinel://" + addr + "/master?" + query,
		"redlock://" + three + "?" + query,
		"etcd://" + addr + "?" + query,
		"postgres://" + addr + "/db?" + query,
		"postgresql://" + addr + "/db?" + query,
		"mysql://" + addr + "/db?" + query,
		"zk://" + addr + "?" + query,
	}
}

// refused opens raw and wants ErrInvalidArgument.
func refused(t *testing.T, raw string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := baton.Open(ctx, raw)
	if b != nil {
		b.Close()
	}
	if !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Open(%q) = %v, want ErrInvalidArgument", raw, err)
	}
}

// TestBadQueryRefused: a query that does not parse is refused before any
// connection, on every scheme, rather than read without the pair it
// could not parse (the prefix would silently be the default).
func TestBadQueryRefused(t *testing.T) {
	addr, accepted := listener(t)
	for _, q := range []string{"prefix=x%zz", "ttl=10s&prefix=%", "prefix=a;b", "%zz=1"} {
		for _, raw := range urls(addr, q) {
			if strings.HasPrefix(raw, "redlock://") {
				// Distinct nodes are checked after the query; the
				// same address three times is refused anyway.
				raw = "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?" + q
			}
			refused(t, raw)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections to the listener; a bad URL must make none", n)
	}
}

// TestBadHostRefused: a host or port that cannot be dialled is refused
// as written, before any connection, on every scheme.
func TestBadHostRefused(t *testing.T) {
	addr, accepted := listener(t)
	for _, h := range []string{"127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:", "[::1:80", "[h]:80", "a b:80"} {
		for _, raw := range urls(h, "ttl=10s") {
			refused(t, raw)
		}
		// One bad host among good ones.
		for _, raw := range []string{
			"redis+cluster://" + addr + "," + h,
			"redlock://" + addr + ",127.0.0.2:1," + h,
			"etcd://" + addr + "," + h,
			"postgres://" + addr + "," + h + "/db",
			"zk://" + addr + "," + h,
		} {
			refused(t, raw)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections to the listener; a bad URL must make none", n)
	}
}
