package redislock

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// needRedis skips the test when redis-server is missing, or fails it in CI.
func needRedis(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not on PATH (CI): %v", err)
		}
		t.Skipf("redis-server not on PATH: %v", err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// server is one redis-server process on loopback, without persistence.
type server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func startRedis(t testing.TB, extra ...string) *server {
	t.Helper()
	needRedis(t)
	s := &server{t: t, port: freePort(t), dir: t.TempDir(), args: extra}
	s.start()
	t.Cleanup(s.kill)
	s.markNew()
	return s
}

// markNew sets the marker (restart.go) on a server just started, as an
// operator may on a server known never to have served a lease: otherwise
// the first grant waits until the server has run for a TTL. restart does
// not call it, so a restarted server is taken for one that lost its data.
func (s *server) markNew() {
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
	defer c.Close()
	if err := c.Set(context.Background(), DefaultPrefix+"alive", "new", 0).Err(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *server) start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--loglevel", "warning"}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), 100*time.Millisecond)
		if err == nil {
			fmt.Fprintf(c, "PING\r\n")
			buf := make([]byte, 16)
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "+PONG") {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not start: %v", s.addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *server) restart() { s.kill(); s.start() }

func (s *server) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

func (s *server) url(query string) string {
	u := "redis://" + s.addr()
	if query != "" {
		u += "?" + query
	}
	return u
}

func (s *server) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr(), ContextTimeoutEnabled: true})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// startCluster builds a Redis Cluster of n masters without replicas.
func startCluster(t testing.TB, n int) []*server {
	t.Helper()
	needRedis(t)
	var ss []*server
	var addrs []string
	for range n {
		s := &server{t: t, port: freePort(t), dir: t.TempDir()}
		s.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000"}
		s.start()
		t.Cleanup(s.kill)
		ss = append(ss, s)
		addrs = append(addrs, s.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range ss {
		c := redis.NewClient(&redis.Options{Addr: s.addr()})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				c.Close()
				t.Fatalf("cluster did not become ok: %v %q", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	// Mark every slot, as markNew does for a single server.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	if _, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, tag := range slotTags() {
			p.Set(ctx, DefaultPrefix+"alive:{"+tag+"}", "new", 0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ss
}

func clusterURL(ss []*server, query string) string {
	var hs []string
	for _, s := range ss {
		hs = append(hs, s.addr())
	}
	u := "redis+cluster://" + strings.Join(hs, ",")
	if query != "" {
		u += "?" + query
	}
	return u
}

func redlockURL(ss []*server, query string) string {
	var hs []string
	for _, s := range ss {
		hs = append(hs, s.addr())
	}
	u := "redlock://" + strings.Join(hs, ",")
	if query != "" {
		u += "?" + query
	}
	return u
}

type quietLogger struct{}

func (quietLogger) Printf(ctx context.Context, format string, v ...any) {}

// go-redis logs every failed dial; the fault tests cause many on purpose.
func init() { redis.SetLogger(quietLogger{}) }
