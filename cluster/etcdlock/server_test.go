package etcdlock

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// The members of a test cluster are embedded etcd servers, each in a
// process of its own: the test binary re-executed with envMember set. This
// keeps the servers' goroutines and descriptors out of the leak checks of
// the tests, and lets a test kill a member as a machine would die.

const envMember = "ETCDLOCK_TEST_MEMBER" // JSON of memberConfig

type memberConfig struct {
	Name, Dir, Peer, Client, Initial string
	// Retention, when set, is the history the member keeps: it compacts
	// what is older as often (etcd's periodic auto-compaction).
	Retention string
}

// runMember serves one member until its standard input closes (the test
// ended or died), and reports "ready" on standard output.
func runMember(js string) int {
	var mc memberConfig
	if err := json.Unmarshal([]byte(js), &mc); err != nil {
		fmt.Fprintln(os.Stderr, "member config:", err)
		return 2
	}
	peer, _ := url.Parse(mc.Peer)
	client, _ := url.Parse(mc.Client)
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = mc.Name, mc.Dir
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenMetricsUrls = nil
	cfg.InitialCluster = mc.Initial
	cfg.InitialClusterToken = "etcdlock-test"
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Fast heartbeats and elections: loopback only, and the fault tests
	// wait for a new leader. No fsync: the tests need no durability.
	cfg.TickMs, cfg.ElectionMs = 20, 200
	cfg.UnsafeNoFsync = true
	// A queue's PutBatch of baton.MaxBatch jobs with keys is one
	// transaction of 2000 operations (queue.go).
	cfg.MaxTxnOps = 4096
	if mc.Retention != "" {
		cfg.AutoCompactionMode, cfg.AutoCompactionRetention = embed.CompactorModePeriodic, mc.Retention
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start etcd:", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd not ready")
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// cluster is a set of member processes on loopback, started by a test.
type cluster struct {
	dir     string
	members []*member
}

type member struct {
	name  string
	url   string // client address
	js    string // its memberConfig
	cmd   *exec.Cmd
	stdin io.WriteCloser
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

// tempBase keeps member data in memory when it can.
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
	return startClusterKeeping(t, n, "")
}

// startClusterKeeping starts n members that compact history older than
// retention (none: keep it all).
func startClusterKeeping(t testing.TB, n int, retention string) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp(tempBase(), "etcdlock-test-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	c := &cluster{dir: dir}
	t.Cleanup(func() {
		for i := range c.members {
			c.stop(i)
		}
		os.RemoveAll(dir)
	})
	var initial []string
	var cfgs []memberConfig
	for i := range n {
		mc := memberConfig{
			Name:      fmt.Sprintf("m%d", i),
			Dir:       fmt.Sprintf("%s/m%d", dir, i),
			Peer:      fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			Client:    fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			Retention: retention,
		}
		initial = append(initial, mc.Name+"="+mc.Peer)
		cfgs = append(cfgs, mc)
	}
	ready := make(chan error, n)
	for _, mc := range cfgs {
		mc.Initial = strings.Join(initial, ",")
		js, _ := json.Marshal(mc)
		m := &member{name: mc.Name, url: strings.TrimPrefix(mc.Client, "http://"), js: string(js)}
		c.members = append(c.members, m)
		c.spawn(t, m, ready)
	}
	for range n {
		select {
		case err := <-ready:
			if err != nil {
				t.Fatalf("member: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("members not ready")
		}
	}
	return c
}

// spawn starts the process of m; ready receives the outcome of its start.
func (c *cluster) spawn(t testing.TB, m *member, ready chan<- error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envMember+"="+m.js)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start member: %v", err)
	}
	m.cmd, m.stdin = cmd, stdin
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("member said %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
}

// restart starts member i again on its data, after stop or kill, and
// waits until it serves (it needs a quorum for that).
func (c *cluster) restart(t testing.TB, i int) {
	t.Helper()
	ready := make(chan error, 1)
	c.spawn(t, c.members[i], ready)
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("member %d not ready", i)
	}
}

// stop ends member i: gracefully when asked through its standard input,
// by SIGKILL if it does not go.
func (c *cluster) stop(i int) {
	m := c.members[i]
	if m.cmd == nil {
		return
	}
	m.stdin.Close()
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-done
	}
	m.cmd = nil
}

// kill ends member i by SIGKILL.
func (c *cluster) kill(i int) {
	m := c.members[i]
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
	m.cmd = nil
}

// endpoints returns the client addresses of the running members.
func (c *cluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		if m.cmd != nil {
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
func (c *cluster) leader(t testing.TB, cl *clientv3.Client) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range c.members {
			if m.cmd == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cl.Status(ctx, m.url)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
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
