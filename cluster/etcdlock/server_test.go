package etcdlock

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// cluster is a set of embedded etcd members on loopback, started by a test.
type cluster struct {
	t       testing.TB
	dir     string
	members []*member
}

type member struct {
	cfg  *embed.Config
	etcd *embed.Etcd
	url  string // client URL
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tempBase keeps member data in memory when it can: the tests need no
// durability, and fsync on a shared disk would dominate their time.
func tempBase() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// startCluster starts n members and waits until they serve. They stop, and
// their data goes, when the test ends.
func startCluster(t testing.TB, n int) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp(tempBase(), "etcdlock-test-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	c := &cluster{t: t, dir: dir}
	t.Cleanup(func() {
		c.stop()
		os.RemoveAll(dir)
	})
	var initial []string
	for i := range n {
		peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = fmt.Sprintf("%s/m%d", dir, i)
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenMetricsUrls = nil
		cfg.InitialClusterToken = "etcdlock-test"
		cfg.ClusterState = embed.ClusterStateFlagNew
		cfg.LogLevel = "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		// Fast heartbeats and elections: loopback only, and the fault
		// tests wait for a new leader.
		cfg.TickMs, cfg.ElectionMs = 20, 200
		cfg.UnsafeNoFsync = true
		initial = append(initial, fmt.Sprintf("%s=%s", cfg.Name, peer.String()))
		c.members = append(c.members, &member{cfg: cfg, url: client.Host})
	}
	for _, m := range c.members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
	}
	errc := make(chan error, n)
	for _, m := range c.members {
		go func() {
			e, err := embed.StartEtcd(m.cfg)
			if err == nil {
				m.etcd = e
			}
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Fatalf("start etcd: %v", err)
		}
	}
	for _, m := range c.members {
		select {
		case <-m.etcd.Server.ReadyNotify():
		case <-time.After(30 * time.Second):
			t.Fatalf("etcd member %s not ready", m.cfg.Name)
		}
	}
	c.warmUp(t)
	return c
}

// warmUp exercises the members once and waits until their goroutines
// settle, so that the leak checks of the tests that follow do not count the
// servers' own background work as a leak.
func (c *cluster) warmUp(t testing.TB) {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := cl.Grant(ctx, 2)
	if err == nil {
		_, err = cl.Put(ctx, "warm-up", "x", clientv3.WithLease(l.ID))
	}
	if err == nil {
		wctx, wcancel := context.WithCancel(ctx)
		cl.Watch(wctx, "warm-up")
		_, err = cl.KeepAliveOnce(ctx, l.ID)
		wcancel()
	}
	if err == nil {
		_, err = cl.Revoke(ctx, l.ID)
	}
	cl.Close()
	if err != nil {
		t.Fatalf("warm up: %v", err)
	}
	last, stable := runtime.NumGoroutine(), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if g := runtime.NumGoroutine(); g != last {
			last, stable = g, time.Now()
		} else if time.Since(stable) > 500*time.Millisecond {
			return
		}
	}
}

func (c *cluster) stop() {
	for _, m := range c.members {
		if m.etcd != nil {
			m.etcd.Close()
			m.etcd = nil
		}
	}
}

// endpoints returns the client addresses of the running members.
func (c *cluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		if m.etcd != nil {
			eps = append(eps, m.url)
		}
	}
	return eps
}

// url returns an etcd:// URL of every member with a key prefix.
func (c *cluster) url(prefix string) string {
	var hosts []string
	for _, m := range c.members {
		hosts = append(hosts, m.url)
	}
	return "etcd://" + strings.Join(hosts, ",") + "/" + prefix
}

// client returns a client of every member, closed when the test ends.
func (c *cluster) client(t testing.TB) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.url)
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// leader returns the index of the member that leads.
func (c *cluster) leader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range c.members {
			if m.etcd != nil && m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no leader")
	return -1
}

// keys lists the keys under prefix.
func keys(ctx context.Context, c *clientv3.Client, prefix string) ([]string, error) {
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out, nil
}
