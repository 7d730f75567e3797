// Package redistest starts real redis-server processes on loopback for the
// tests of the Redis backends. A test that needs one is skipped when
// redis-server is missing, and fails then in CI (CI=true).
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Need skips the test when redis-server is missing, or fails it in CI.
func Need(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not on PATH (CI): %v", err)
		}
		t.Skipf("redis-server not on PATH: %v", err)
	}
}

// FreePort returns a TCP port of loopback that nothing listens on.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Server is one redis-server process on loopback, without persistence.
type Server struct {
	T    testing.TB
	Port int
	Dir  string
	Args []string // extra arguments of redis-server
	cmd  *exec.Cmd
}

// Addr returns host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Start starts a server, marked as new (MarkNew), killed when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	s := New(t, extra...)
	s.Start()
	t.Cleanup(s.Kill)
	s.MarkNew()
	return s
}

// New returns a server that has not been started.
func New(t testing.TB, extra ...string) *Server {
	t.Helper()
	Need(t)
	return &Server{T: t, Port: FreePort(t), Dir: t.TempDir(), Args: extra}
}

// Marker is the marker key of a single server under the default prefix
// "baton:" (the restart check of the Redis backends).
const Marker = "baton:alive"

// MarkNew sets the marker on a server just started, as an operator may on
// a server known never to have served a lease: otherwise the first grant
// waits until the server has run for a TTL. Restart does not call it, so a
// restarted server is taken for one that lost its data.
func (s *Server) MarkNew() {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	if err := c.Set(context.Background(), Marker, "new", 0).Err(); err != nil {
		s.T.Fatal(err)
	}
}

// StartEmpty starts a server without the marker, as one that was just
// started (or restarted empty) is, killed when the test ends.
func StartEmpty(t testing.TB, extra ...string) *Server {
	t.Helper()
	s := New(t, extra...)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// RunID returns the run id of the running server (INFO server: run_id).
func (s *Server) RunID() string {
	s.T.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		s.T.Fatal(err)
	}
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
			return v
		}
	}
	s.T.Fatalf("INFO server of %s has no run_id", s.Addr())
	return ""
}

// Start starts the process and waits until it answers PING (or refuses
// it for want of a password).
func (s *Server) Start() {
	s.T.Helper()
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.Dir, "--loglevel", "warning"}, s.Args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.T.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond)
		if err == nil {
			fmt.Fprintf(c, "PING\r\n")
			buf := make([]byte, 16)
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			c.Close()
			// A server with a password answers NOAUTH: it is up.
			if r := string(buf[:n]); strings.HasPrefix(r, "+PONG") || strings.HasPrefix(r, "-NOAUTH") {
				return
			}
		}
		if time.Now().After(deadline) {
			s.T.Fatalf("redis-server on %s did not start: %v", s.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the process (resuming it first if stopped).
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = resume(s.cmd.Process)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart kills the server and starts it again, empty.
func (s *Server) Restart() { s.Kill(); s.Start() }

// Signal sends sig to the process.
func (s *Server) Signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.T.Fatal(err)
	}
}

// URL returns the redis:// URL of the server with query.
func (s *Server) URL(query string) string { return URL("redis", []*Server{s}, query) }

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	s.T.Cleanup(func() { c.Close() })
	return c
}

// URL returns scheme://h1:p1,h2:p2...?query for the servers.
func URL(scheme string, ss []*Server, query string) string {
	var hs []string
	for _, s := range ss {
		hs = append(hs, s.Addr())
	}
	u := scheme + "://" + strings.Join(hs, ",")
	if query != "" {
		u += "?" + query
	}
	return u
}

type quietLogger struct{}

func (quietLogger) Printf(ctx context.Context, format string, v ...any) {}

// go-redis logs every failed dial; the fault tests cause many on purpose.
func init() { redis.SetLogger(quietLogger{}) }
