package main

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
)

// The etcd server of a test is an embedded member in a process of its own:
// the test binary re-executed with envEtcdMember set to "DIR PEERURL CLIENTURL".
const envEtcdMember = "BATON_TEST_ETCD_MEMBER"

// runEtcdMember serves until its standard input closes and says "ready" on
// standard output once it serves.
func runEtcdMember(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintln(os.Stderr, "bad member spec", spec)
		return 2
	}
	peer, _ := url.Parse(f[1])
	client, _ := url.Parse(f[2])
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "m0", f[0]
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenMetricsUrls = nil
	cfg.InitialCluster = "m0=" + f[1]
	cfg.InitialClusterToken = "baton-cmd-test"
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs = 20, 200
	cfg.UnsafeNoFsync = true
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

func freeLoopbackURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// startEtcd starts a one-member etcd on loopback and returns its baton URL.
func startEtcd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "baton-cmd-etcd-")
		if err == nil {
			dir = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	peer, client := freeLoopbackURL(t), freeLoopbackURL(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envEtcdMember+"="+dir+"/m0 "+peer+" "+client)
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
		if err := waitTimeout(cmd, 10*time.Second); err != nil && exitCode(err) != 0 {
			t.Logf("etcd member: %v", err)
		}
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("member said %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("etcd: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("etcd not ready within 60 s")
	}
	return "etcd://" + strings.TrimPrefix(client, "http://")
}

func TestCounterEtcd(t *testing.T) {
	t.Parallel()
	testCounter(t, startEtcd(t))
}

func TestSemEtcd(t *testing.T) {
	t.Parallel()
	testSem(t, startEtcd(t))
}

func TestStatusEtcd(t *testing.T) {
	t.Parallel()
	url := startEtcd(t)
	holder(t, url, "etcd/held")
	r := run(t, url, "status", "--json", "etcd/held")
	if r.code != 0 {
		t.Fatalf("status: exit %d, stderr %q", r.code, r.stderr)
	}
	rep := decodeReport(t, r.stdout)
	if len(rep.Objects) != 1 || len(rep.Objects[0].Holders) != 1 || rep.Objects[0].Holders[0].TTLSeconds == nil {
		t.Errorf("status on etcd: %s", r.stdout)
	}
	if r := run(t, url, "run", "-n", "etcd/held", "true"); r.code != 1 {
		t.Errorf("-n on etcd against a held lock: exit %d, stderr %q", r.code, r.stderr)
	}
}
