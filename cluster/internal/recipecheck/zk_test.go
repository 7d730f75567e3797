package recipecheck

import (
	"bufio"
	"context"
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

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/zklock"
	"github.com/batonlock/baton/recipe/recipetest"
)

// No LossBound: a ZooKeeper hold does not watch its own node, so its
// holder learns of a Remove only when it unlocks.
var zkSuite = recipetest.Suite{Name: "zookeeper", Open: openZK, Lease: true, Failover: ttl + time.Second}

// openZK opens a zk:// URL, whose ttl parameter is the session timeout.
func openZK(url string) (baton.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return zklock.OpenURL(ctx, url)
}

// startZK starts a standalone ZooKeeper (ticks of 100 ms, no fsync) on a
// free loopback port and returns a zk:// URL with a 2 s session; the
// server is killed when the test ends. The test is skipped without
// ZooKeeper or java, and fails in CI.
func startZK(t testing.TB) string {
	t.Helper()
	_, errJar := os.Stat("/usr/share/java/zookeeper.jar")
	_, errJava := exec.LookPath("java")
	if err := cmpErr(errJar, errJava); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("zookeeper or java missing (CI): %v", err)
		}
		t.Skipf("zookeeper or java missing: %v", err)
	}
	dir, err := os.MkdirTemp("/dev/shm", "recipecheck-zk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := strings.Join([]string{"tickTime=100", "dataDir=" + dir, fmt.Sprintf("clientPort=%d", port),
		"clientPortAddress=127.0.0.1", "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr",
		"minSessionTimeout=200", "maxSessionTimeout=60000", "forceSync=no"}, "\n") + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir="+dir, "-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/*",
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(60 * time.Second); ; {
		if out, _ := fourLetter(addr, "srvr"); strings.Contains(out, "Mode: standalone") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("zookeeper not ready in 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("zk://%s/recipecheck?ttl=2s", addr)
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fourLetter sends a four-letter command and returns the answer.
func fourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	return string(b), err
}

func TestZooKeeper(t *testing.T) {
	recipetest.Run(t, zkSuite, startZK(t))
}

func BenchmarkFailoverZooKeeper(b *testing.B) { recipetest.BenchFailover(b, zkSuite, startZK(b)) }
