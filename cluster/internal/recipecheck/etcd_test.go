package recipecheck

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/batonlock/baton/recipe/recipetest"
)

// The etcd server is embedded in a process of its own (the test binary
// with envEtcd set), so that its goroutines stay out of the tests' and a
// test could kill it as a machine dies.
const envEtcd = "RECIPECHECK_ETCD" // "dir client-url peer-url"

// serveEtcd serves one member until standard input closes, and says
// "ready" on standard output.
func serveEtcd(arg string) int {
	f := strings.Fields(arg)
	client, _ := url.Parse(f[1])
	peer, _ := url.Parse(f[2])
	cfg := embed.NewConfig()
	cfg.Dir = f[0]
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenMetricsUrls = nil
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // the tests need no durability
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

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd starts a one-member etcd and returns its etcd:// URL; it stops
// when the test ends.
func startEtcd(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	client := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envEtcd+"="+dir+"/data "+client+" "+peer)
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
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan error, 1)
	go func() {
		l, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(l) != "ready" {
			err = fmt.Errorf("etcd said %q", l)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("etcd not ready")
	}
	return "etcd://" + strings.TrimPrefix(client, "http://") + "/recipecheck"
}

func TestEtcd(t *testing.T) {
	recipetest.Run(t, etcdSuite, startEtcd(t))
}

func BenchmarkFailoverEtcd(b *testing.B) {
	recipetest.BenchFailover(b, etcdSuite, startEtcd(b))
}
