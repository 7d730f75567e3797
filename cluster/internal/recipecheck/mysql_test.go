package recipecheck

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/mysqllock"
	"github.com/batonlock/baton/recipe/recipetest"
)

// A waiter claims a free row at its next GET_LOCK slice at the latest, so
// the failover bound has a renewal period more than the TTL.
var mysqlSuite = recipetest.Suite{Name: "mysql", Open: openMySQL, Lease: true, Failover: ttl + 2*time.Second, LossBound: 10 * time.Second}

func openMySQL(url string) (baton.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return mysqllock.OpenURL(ctx, url, lease.WithTTL(ttl))
}

// sbin finds a server program in PATH or the usual sbin directories.
func sbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// startMySQL initializes a data directory in memory, starts mariadbd (or
// mysqld) on a free loopback port, creates database baton and returns its
// mysql:// URL; the server is killed when the test ends. The test is
// skipped without a server, and fails in CI.
func startMySQL(t testing.TB) string {
	t.Helper()
	server, install := "", ""
	for _, pair := range [][2]string{{"mariadbd", "mariadb-install-db"}, {"mysqld", "mysql_install_db"}} {
		s, err1 := sbin(pair[0])
		i, err2 := sbin(pair[1])
		if err1 == nil && err2 == nil {
			server, install = s, i
			break
		}
	}
	if server == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no MariaDB or MySQL server (CI)")
		}
		t.Skip("no MariaDB or MySQL server")
	}
	dir, err := os.MkdirTemp("/dev/shm", "recipecheck-mysql-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--user="+user, "--innodb-log-file-size=8M").CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", install, err, out)
	}
	port := freePort(t)
	cmd := exec.Command(server, "--no-defaults", "--datadir="+data, "--socket="+filepath.Join(dir, "sock"),
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--user="+user, "--innodb-log-file-size=8M",
		"--skip-name-resolve", "--max-connections=2000", "--log-error="+filepath.Join(dir, "err.log"),
		"--pid-file="+filepath.Join(dir, "pid"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/mysql?timeout=2s", port))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(60 * time.Second); ; {
		_, err := db.Exec("CREATE DATABASE IF NOT EXISTS baton")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "err.log"))
			t.Fatalf("mysql server did not start: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/baton", port)
}

func TestMySQL(t *testing.T) {
	recipetest.Run(t, mysqlSuite, startMySQL(t))
}

func BenchmarkFailoverMySQL(b *testing.B) { recipetest.BenchFailover(b, mysqlSuite, startMySQL(b)) }
