package opencheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/servers"
)

// counter forwards TCP connections to a server and counts the bytes the
// clients send it.
type counter struct {
	l    net.Listener
	sent atomic.Int64
	mu   sync.Mutex
	cs   []net.Conn // guarded by mu
}

func startCounter(t *testing.T, target string) *counter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{l: l}
	t.Cleanup(c.close)
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.cs = append(c.cs, in, out)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(countingWriter{out, &c.sent}, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

func (c *counter) close() {
	c.l.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.cs {
		x.Close()
	}
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// serve starts a throwaway server: skipped when it is missing, failed in CI.
func serve(t *testing.T, name string) string {
	t.Helper()
	u, stop, err := servers.Serve(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(stop)
	return u
}

// through returns raw with each of its hosts replaced by a counter in
// front of it.
func through(t *testing.T, raw string) (string, []*counter) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	var cs []*counter
	for _, h := range strings.Split(u.Host, ",") {
		c := startCounter(t, h)
		cs = append(cs, c)
		hosts = append(hosts, c.l.Addr().String())
	}
	u.Host = strings.Join(hosts, ",")
	return u.String(), cs
}

func sent(cs []*counter) int64 {
	var n int64
	for _, c := range cs {
		n += c.sent.Load()
	}
	return n
}

// TestOpenHandleNoRoundTrip: on every network backend, opening a Mutex or
// an RWMutex handle sends the server nothing; what a name needs on the
// server is made by its first use. (A Semaphore's open still stores or
// checks its capacity on the server, one round trip: a capacity other than
// the stored one is refused there, with ErrMismatch.) Each open is counted in the
// bytes the client sends through a proxy: n opens that each asked the
// server anything would send at least n bytes; the best of three windows
// must send fewer (a session's keep-alive may fall in one). A Lock
// afterwards does reach the server through the same proxy.
func TestOpenHandleNoRoundTrip(t *testing.T) {
	redis := func(t *testing.T) string { return serve(t, servers.Redis) }
	cases := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"redis", redis},
		{"redlock", func(t *testing.T) string {
			var hosts []string
			for range 3 {
				u, err := url.Parse(redis(t))
				if err != nil {
					t.Fatal(err)
				}
				hosts = append(hosts, u.Host)
			}
			return "redlock://" + strings.Join(hosts, ",")
		}},
		{"etcd", func(t *testing.T) string { return serve(t, servers.Etcd) }},
		{"postgres", func(t *testing.T) string { return serve(t, servers.Postgres) }},
		{"mysql", func(t *testing.T) string { return serve(t, servers.MariaDB) }},
		{"zookeeper", func(t *testing.T) string { return serve(t, servers.ZooKeeper) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, cs := through(t, c.url(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := baton.Open(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			const n = 100
			kinds := []struct {
				kind string
				open func(name string) (io.Closer, error)
			}{
				{"Mutex", func(name string) (io.Closer, error) { return b.Mutex(ctx, name) }},
				{"RWMutex", func(name string) (io.Closer, error) { return b.RWMutex(ctx, name) }},
			}
			for _, k := range kinds {
				best := int64(-1)
				for w := range 3 {
					before := sent(cs)
					var hs []io.Closer
					for i := range n {
						h, err := k.open(fmt.Sprintf("rt-%s-%d-%d", k.kind, w, i))
						if errors.Is(err, baton.ErrUnsupported) {
							t.Logf("%s: %v", k.kind, err)
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						hs = append(hs, h)
					}
					d := sent(cs) - before
					for _, h := range hs {
						h.Close()
					}
					if len(hs) == 0 {
						break
					}
					if best < 0 || d < best {
						best = d
					}
				}
				if best >= n {
					t.Errorf("opening %d %s handles sent %d bytes (best of three): a round trip at open", n, k.kind, best)
				} else if best >= 0 {
					t.Logf("%d %s opens: %d bytes sent", n, k.kind, best)
				}
			}
			m, err := b.Mutex(ctx, "rt-used")
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			before := sent(cs)
			if _, err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if sent(cs) == before {
				t.Fatal("a Lock and Unlock sent nothing through the proxy: it does not count")
			}
		})
	}
}
