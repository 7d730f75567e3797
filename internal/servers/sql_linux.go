package servers

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // for the CREATE DATABASE of startMariaDB
)

func startPostgres() (string, func(), error) {
	u, p, err := runPostgres()
	if err != nil {
		return "", nil, err
	}
	return u, p.stop, nil
}

// runPostgres initializes a cluster and runs postgres on it, as nobody
// when this process is root (postgres refuses root).
func runPostgres() (string, *proc, error) {
	bin, err := lookPath("postgres", "/usr/lib/postgresql/*/bin")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Dir(bin)
	dir, err := dataDir("postgres")
	if err != nil {
		return "", nil, err
	}
	cred, err := unprivileged()
	if err == nil && cred != nil {
		err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ready := func() bool {
		b, _ := os.ReadFile(filepath.Join(data, "postmaster.pid"))
		ls := strings.Split(string(b), "\n")
		return len(ls) > 7 && strings.TrimSpace(ls[7]) == "ready"
	}
	// SIGINT is postgres's fast shutdown, SIGQUIT its immediate one: both
	// remove its shared memory, which SIGKILL would leave behind.
	p, err := serve(&proc{dir: dir, cred: cred, quit: syscall.SIGINT, orphan: syscall.SIGQUIT}, 60*time.Second, ready, filepath.Join(bin, "postgres"), "-D", data, "-k", dir,
		"-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	if err != nil {
		return "", nil, err
	}
	return "postgres://postgres@" + loopback(port) + "/postgres", p, nil
}

// unprivileged returns the credential of nobody when this process is
// root, else nil (the current user).
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// startMariaDB initializes a data directory and runs mariadbd on it, with
// a database baton for the URL to name.
func startMariaDB() (string, func(), error) {
	bin, err := lookPath("mariadbd")
	if err != nil {
		return "", nil, err
	}
	install, err := lookPath("mariadb-install-db")
	if err != nil {
		return "", nil, err
	}
	dir, err := dataDir("mariadb")
	if err != nil {
		return "", nil, err
	}
	u := os.Getenv("USER")
	if u == "" {
		u = "root"
	}
	data := filepath.Join(dir, "data")
	out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--user="+u, "--innodb-log-file-size=8M").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("%s: %v\n%s", install, err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ready := func() bool { _, err := os.Stat(filepath.Join(dir, "pid")); return err == nil && dials(loopback(port)) }
	p, err := serve(&proc{dir: dir}, 60*time.Second, ready, bin, "--no-defaults", "--datadir="+data, "--socket="+filepath.Join(dir, "sock"),
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--user="+u, "--innodb-log-file-size=8M",
		"--skip-name-resolve", "--log-error="+filepath.Join(dir, "err.log"), "--pid-file="+filepath.Join(dir, "pid"))
	if err != nil {
		return "", nil, err
	}
	if err := createDatabase(loopback(port)); err != nil {
		p.stop()
		return "", nil, err
	}
	return "mysql://root@" + loopback(port) + "/baton", p.stop, nil
}

func createDatabase(addr string) error {
	db, err := sql.Open("mysql", "root@tcp("+addr+")/")
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS baton")
	return err
}
