package recipecheck

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/pglock"
	"github.com/batonlock/baton/recipe/recipetest"
)

// Failover: a dead member's slot comes back when its session ends, after
// which the next holder may wait out the lease row it left (TTL), plus two
// round trips of the release and the wake-up; 2 s of margin for those on a
// loaded run (one run took 3.37 s against TTL + 1 s).
var pgSuite = recipetest.Suite{Name: "postgres", Open: openPG, Lease: true, Failover: ttl + 2*time.Second, LossBound: 10 * time.Second}

func openPG(url string) (baton.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return pglock.OpenURL(ctx, url, lease.WithTTL(ttl))
}

// startPG runs initdb and postgres (as nobody when the tests run as root,
// since postgres refuses root) on a free loopback port, without
// durability, and returns its URL; the server stops and its data goes
// when the test ends. The test is skipped without postgres, and fails in
// CI.
func startPG(t testing.TB) string {
	t.Helper()
	bin := ""
	if p, err := exec.LookPath("postgres"); err == nil {
		bin = filepath.Dir(p)
	} else if ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(ms) > 0 {
		bin = filepath.Dir(ms[len(ms)-1])
	} else if os.Getenv("CI") == "true" {
		t.Fatal("postgres not found (CI)")
	} else {
		t.Skip("postgres not found")
	}
	var cred *syscall.Credential
	dir, err := os.MkdirTemp("/dev/shm", "recipecheck-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
		return cmd
	}
	data := filepath.Join(dir, "data")
	initdb := run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.Stdout, initdb.Stderr = io.Discard, os.Stderr
	if err := initdb.Run(); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	port := freePort(t)
	pg := run("postgres", "-D", data, "-k", dir, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=400", "-c", "log_min_messages=fatal")
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pg.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = pg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-pg.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		b, _ := os.ReadFile(filepath.Join(data, "postmaster.pid"))
		if ls := strings.Split(string(b), "\n"); len(ls) > 7 && strings.TrimSpace(ls[7]) == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("postgres not ready in 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

func TestPostgres(t *testing.T) {
	recipetest.Run(t, pgSuite, startPG(t))
}

func BenchmarkFailoverPostgres(b *testing.B) { recipetest.BenchFailover(b, pgSuite, startPG(b)) }
