// Package topology tests redislock on replicated Redis deployments built
// from real servers on loopback: a master with a replica under three
// Sentinels, and a Redis Cluster of three masters with a replica each.
// Each deployment is built once for the package and torn down after the
// last test; the tests kill masters and move slots while clients contend.
package topology

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// proc is one redis-server process (a data node or a Sentinel) that lives
// for the whole package, unlike redistest's, which end with their test.
type proc struct {
	port int
	dir  string
	args []string // after --port and --bind
	conf string   // a Sentinel's config file ("" for a data node)
	cmd  *exec.Cmd
}

var (
	procsMu sync.Mutex
	procs   []*proc // guarded by procsMu: killed by TestMain
	baseDir string  // set by TestMain
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "baton-topology-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	baseDir = d
	code := m.Run()
	procsMu.Lock()
	for _, p := range procs {
		p.kill()
	}
	procsMu.Unlock()
	if code == 0 {
		_ = os.RemoveAll(d)
	} else {
		fmt.Fprintln(os.Stderr, "server logs kept in", d)
	}
	os.Exit(code)
}

// need skips the test when redis-server is missing, or fails it in CI.
func need(t testing.TB) {
	t.Helper()
	for _, b := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(b); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not on PATH (CI): %v", b, err)
			}
			t.Skipf("%s not on PATH: %v", b, err)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// newProc prepares a process on a free port with a directory of its own.
func newProc(args ...string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(baseDir, strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &proc{port: port, dir: dir, args: args}
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
	return p, nil
}

func (p *proc) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// start starts the process and waits until it answers PING.
func (p *proc) start() error {
	var args []string
	if p.conf != "" {
		args = append(args, p.conf, "--sentinel")
	}
	args = append(args, "--port", strconv.Itoa(p.port), "--bind", "127.0.0.1", "--dir", p.dir,
		"--loglevel", "warning", "--logfile", filepath.Join(p.dir, "log"))
	if p.conf == "" {
		// A replica's full sync starts at once rather than after 5 s.
		args = append(args, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	}
	p.cmd = exec.Command("redis-server", append(args, p.args...)...)
	if err := p.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not start: %v", p.addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and reaps the process.
func (p *proc) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

func (p *proc) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1, DialTimeout: time.Second})
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(d time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(d)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v (last error: %v)", what, d, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// infoField returns field of INFO section from c.
func infoField(c *redis.Client, section, field string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return "", err
	}
	for l := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v, nil
		}
	}
	return "", nil
}

// linkUp waits until replica r has an up link to its master.
func linkUp(r *proc, d time.Duration) error {
	c := r.client()
	defer c.Close()
	return waitFor(d, "replica "+r.addr()+" in sync", func() (bool, error) {
		v, err := infoField(c, "replication", "master_link_status")
		return v == "up", err
	})
}
