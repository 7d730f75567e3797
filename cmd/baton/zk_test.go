package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startZK starts a standalone ZooKeeper server (the Debian package's jars)
// on a free loopback port, stopped by PID when the test ends, and returns
// a zk:// URL of it.
func startZK(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("zookeeper is not installed (make deps installs it): %v", err)
		}
		t.Skip("zookeeper is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "zoo.cfg")
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	conf := "tickTime=100\ndataDir=" + dir + "\nclientPort=" + port + "\nclientPortAddress=127.0.0.1\n" +
		"admin.enableServer=false\n4lw.commands.whitelist=ruok\nminSessionTimeout=200\nmaxSessionTimeout=60000\nforceSync=no\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/*", "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start zookeeper: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			continue
		}
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, "ruok")
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) == "imok" {
			return fmt.Sprintf("zk://%s/baton-cmd-%d?ttl=2s", addr, os.Getpid())
		}
	}
	t.Fatal("zookeeper not ready after 30 s")
	return ""
}

func TestCounterZK(t *testing.T) {
	t.Parallel()
	testCounter(t, startZK(t))
}

func TestSemZK(t *testing.T) {
	t.Parallel()
	testSem(t, startZK(t))
}

func TestBadZKURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"zk://127.0.0.1:99999", "zk://127.0.0.1:1?ttl=0s", "zk://127.0.0.1:1?color=red"} {
		r := run(t, u, "run", "-n", "x", "true")
		if r.code != 64 {
			t.Errorf("%s: exit %d, want 64; stderr %q", u, r.code, r.stderr)
		}
	}
}

func TestStatusZK(t *testing.T) {
	t.Parallel()
	url := startZK(t)
	holder(t, url, "zk/held")
	r := run(t, url, "status", "--json", "zk/held")
	if r.code != 0 {
		t.Fatalf("status: exit %d, stderr %q", r.code, r.stderr)
	}
	rep := decodeReport(t, r.stdout)
	if len(rep.Objects) != 1 || len(rep.Objects[0].Holders) != 1 {
		t.Errorf("status on zookeeper: %s", r.stdout)
	}
	if r := run(t, url, "run", "-n", "zk/held", "true"); r.code != 1 {
		t.Errorf("-n on zookeeper against a held lock: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, url, "ls"); r.code != 0 || !strings.Contains(r.stdout, "zk/held") {
		t.Errorf("ls: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
