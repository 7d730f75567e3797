//go:build linux

package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// The PostgreSQL, MariaDB and ZooKeeper servers of a run: each a throwaway
// instance on a free loopback port with its data in memory (/dev/shm when
// there is one), stopped by its PID and removed when the run ends. The
// kernel also ends each with the bench process (Pdeathsig), so a killed
// run leaves no server behind.

// dbServer is one server process started for the run.
type dbServer struct {
	what string
	addr string
	dir  string
	cmd  *exec.Cmd
	quit syscall.Signal // asks for a quick, clean shutdown
}

func (s *dbServer) stop() {
	if s == nil {
		return
	}
	if s.cmd != nil {
		// A fast shutdown: postgres removes its shared memory (files in
		// /dev/shm) only when it ends by itself. SIGKILL, to its process
		// group, when it does not end in time.
		_ = s.cmd.Process.Signal(s.quit)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	os.RemoveAll(s.dir)
}

// cpu is the CPU time the server and its current children have used, so
// that CPU per acquisition covers both ends.
func (s *dbServer) cpu() time.Duration {
	if s == nil || s.cmd == nil {
		return 0
	}
	pid := s.cmd.Process.Pid
	d := procCPU(pid)
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			d += procCPU(c)
		}
	}
	return d
}

func serverDir(prefix string) (string, error) {
	return os.MkdirTemp(tmpBase(), prefix)
}

// waitFor polls ready until it succeeds or d passes.
func waitFor(d time.Duration, ready func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := ready()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nobody is the credential postgres runs with when the bench runs as root
// (postgres refuses root); nil otherwise.
func nobody() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if g, err := user.LookupGroup("nogroup"); err == nil {
		gid, _ = strconv.Atoi(g.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func pgBin() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(ms) == 0 {
		return "", fmt.Errorf("postgres not on PATH nor under /usr/lib/postgresql (apt-get install postgresql)")
	}
	return filepath.Dir(ms[len(ms)-1]), nil
}

// startPostgres runs initdb and postgres; the URL is that of the server's
// postgres database.
func startPostgres(ctx context.Context) (*dbServer, string, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, "", err
	}
	cred, err := nobody()
	if err != nil {
		return nil, "", err
	}
	dir, err := serverDir("baton-bench-pg-")
	if err != nil {
		return nil, "", err
	}
	s := &dbServer{what: "postgres", dir: dir, quit: syscall.SIGINT}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			s.stop()
			return nil, "", err
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := command("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		s.stop()
		return nil, "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		s.stop()
		return nil, "", err
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	s.cmd = command("postgres", "-D", data, "-k", dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "synchronous_commit=off", "-c", "max_connections=400", "-c", "shared_buffers=32MB",
		"-c", "log_min_messages=fatal", "-c", "max_locks_per_transaction=256")
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		s.stop()
		return nil, "", err
	}
	url := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.addr)
	err = waitFor(60*time.Second, func() error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		s.stop()
		return nil, "", fmt.Errorf("postgres did not answer: %w", err)
	}
	return s, url, nil
}

func lookSbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"} {
		if p := filepath.Join(d, name); fileExists(p) {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// startMariaDB initializes a data directory and starts mariadbd (or
// mysqld) on it, with a database baton; dsn is for database/sql.
func startMariaDB(ctx context.Context) (s *dbServer, dsn string, err error) {
	var server, install string
	for _, pair := range [][2]string{{"mariadbd", "mariadb-install-db"}, {"mysqld", "mysql_install_db"}} {
		a, err1 := lookSbin(pair[0])
		b, err2 := lookSbin(pair[1])
		if err1 == nil && err2 == nil {
			server, install = a, b
			break
		}
	}
	if server == "" {
		return nil, "", fmt.Errorf("neither mariadbd nor mysqld (with its install-db script) found (apt-get install mariadb-server)")
	}
	dir, err := serverDir("baton-bench-mysql-")
	if err != nil {
		return nil, "", err
	}
	s = &dbServer{what: "mariadb", dir: dir, quit: syscall.SIGTERM}
	usr := "root"
	if u, err := user.Current(); err == nil {
		usr = u.Username
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--user="+usr, "--innodb-log-file-size=8M").CombinedOutput(); err != nil {
		s.stop()
		return nil, "", fmt.Errorf("%s: %v\n%s", install, err, out)
	}
	port, err := freePort()
	if err != nil {
		s.stop()
		return nil, "", err
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	s.cmd = exec.Command(server, "--no-defaults", "--datadir="+data, "--socket="+filepath.Join(dir, "sock"),
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--user="+usr, "--innodb-log-file-size=8M",
		"--innodb-flush-log-at-trx-commit=0", "--skip-name-resolve", "--max-connections=2000",
		"--log-error="+filepath.Join(dir, "err.log"), "--pid-file="+filepath.Join(dir, "pid"))
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		s.stop()
		return nil, "", err
	}
	dsn = "root@tcp(" + s.addr + ")/mysql?timeout=2s"
	err = waitFor(30*time.Second, func() error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS baton")
		return err
	})
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "err.log"))
		s.stop()
		return nil, "", fmt.Errorf("mariadb did not answer: %w\n%s", err, log)
	}
	return s, "root@tcp(" + s.addr + ")/baton?timeout=2s", nil
}

// zkJar is the server's jar (a variable, for the test of a missing one).
var zkJar = "/usr/share/java/zookeeper.jar"

// startZooKeeper runs a standalone ZooKeeper server (the Debian package's
// jars) in a JVM.
func startZooKeeper() (*dbServer, error) {
	if !fileExists(zkJar) {
		return nil, fmt.Errorf("%s not found (apt-get install zookeeper)", zkJar)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java not on PATH: %w", err)
	}
	dir, err := serverDir("baton-bench-zk-")
	if err != nil {
		return nil, err
	}
	s := &dbServer{what: "zookeeper", dir: dir, quit: syscall.SIGTERM}
	port, err := freePort()
	if err != nil {
		s.stop()
		return nil, err
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := strings.Join([]string{"tickTime=100", "initLimit=50", "syncLimit=5", "dataDir=" + dir,
		"clientPort=" + strconv.Itoa(port), "clientPortAddress=127.0.0.1", "admin.enableServer=false",
		"4lw.commands.whitelist=ruok", "minSessionTimeout=200", "maxSessionTimeout=60000",
		"forceSync=no", "globalOutstandingLimit=10000"}, "\n") + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		s.stop()
		return nil, err
	}
	s.cmd = exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.log.dir="+dir,
		"-cp", zkJar+":/usr/share/java/*", "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, io.Discard
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		s.stop()
		return nil, err
	}
	err = waitFor(60*time.Second, func() error {
		out, err := fourLetter(s.addr, "ruok")
		if err == nil && out != "imok" {
			err = fmt.Errorf("ruok: %q", out)
		}
		return err
	})
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("zookeeper did not answer: %w", err)
	}
	return s, nil
}

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
	b, err := io.ReadAll(c)
	return string(b), err
}
