package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/servers"
)

// TestBackends runs the example's workers on every networked backend, each
// on a throwaway server of its own: the same program, one constructor line
// per backend.
func TestBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five servers")
	}
	bin := filepath.Join(t.TempDir(), "cluster")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, s := range []string{servers.Redis, servers.Etcd, servers.Postgres, servers.MariaDB, servers.ZooKeeper} {
		t.Run(s, func(t *testing.T) {
			out, err := exec.Command(bin, "-backend", s, "-n", "3", "-rounds", "3").CombinedOutput()
			if err != nil && os.Getenv("CI") != "true" && (strings.Contains(string(out), "install") || strings.Contains(string(out), "not found")) {
				t.Skipf("%s is not installed here:\n%s", s, out)
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if want := "all 3 workers done: 9 holds, tokens increasing in every worker"; !strings.Contains(string(out), want) {
				t.Fatalf("the output lacks %q:\n%s", want, out)
			}
		})
	}
}

// TestRedisServerNoRestartWait: the Redis server the example starts is new,
// and the example says so (its run id), so its workers are not held up by
// the wait for leases a server that started empty may have lost (a TTL,
// 10 s by default).
func TestRedisServerNoRestartWait(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cluster")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	start := time.Now()
	out, err := exec.Command(bin, "-backend", servers.Redis, "-n", "2", "-rounds", "1").CombinedOutput()
	if err != nil && os.Getenv("CI") != "true" && strings.Contains(string(out), "install") {
		t.Skipf("redis-server is not installed here:\n%s", out)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if d := time.Since(start); d > 5*time.Second || strings.Contains(string(out), "started empty") {
		t.Fatalf("the demo took %v (the restart-safety wait is a TTL):\n%s", d, out)
	}
}
