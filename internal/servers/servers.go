// Package servers starts throwaway servers for the examples and their
// tests: redis-server, an embedded etcd, PostgreSQL, MariaDB and
// ZooKeeper, each on a free loopback port with a data directory of its
// own, stopped by its PID.
package servers

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Names of the servers Serve can start, as a backend flag gives them.
const (
	Redis     = "redis-server"
	Etcd      = "etcd-embedded"
	Postgres  = "postgres-server"
	MariaDB   = "mariadb-server"
	ZooKeeper = "zookeeper-server"
)

// Serve starts the server backend names (one of the constants above) and
// returns its URL and a function that stops it and removes its data. Any
// other backend is returned as it is, with a stop that does nothing.
func Serve(backend string) (string, func(), error) {
	start := map[string]func() (string, func(), error){
		Redis: startRedis, Etcd: startEtcd, Postgres: startPostgres, MariaDB: startMariaDB, ZooKeeper: startZooKeeper,
	}[backend]
	if start == nil {
		return backend, func() {}, nil
	}
	u, stop, err := start()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", backend, err)
	}
	return u, stop, nil
}

func startRedis() (string, func(), error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	addr := loopback(port)
	p, err := serve(nil, 10*time.Second, func() bool { return dials(addr) },
		"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return "", nil, err
	}
	return "redis://" + addr, p.stop, nil
}

// proc is a started server process, stopped by its PID.
type proc struct {
	cmd  *exec.Cmd
	dir  string              // removed after the stop; "" for none
	cred *syscall.Credential // run as; nil: this process's user
}

// run starts name; the server gets SIGKILL if this process's thread that
// started it ends first.
func run(p *proc, name string, args ...string) (*proc, error) {
	if p == nil {
		p = &proc{}
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		if p.dir != "" {
			os.RemoveAll(p.dir)
		}
		return nil, fmt.Errorf("start %s (install it, or give the URL of a running server): %w", name, err)
	}
	p.cmd = cmd
	return p, nil
}

// serve runs name as run does and waits at most d until ready reports
// true; a server not ready by then is stopped.
func serve(p *proc, d time.Duration, ready func() bool, name string, args ...string) (*proc, error) {
	p, err := run(p, name, args...)
	if err != nil {
		return nil, err
	}
	if err := waitFor(d, ready); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func (p *proc) stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}

// dataDir makes a data directory, in memory where the machine has it.
func dataDir(prefix string) (string, error) {
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	return os.MkdirTemp(base, "baton-"+prefix+"-")
}

// lookPath finds a server binary on PATH or in the system directories
// Debian installs servers to.
func lookPath(name string, dirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, pattern := range append(dirs, "/usr/sbin", "/usr/local/sbin") {
		ms, _ := filepath.Glob(filepath.Join(pattern, name))
		if len(ms) > 0 {
			return ms[len(ms)-1], nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

func waitFor(d time.Duration, ready func() bool) error {
	for deadline := time.Now().Add(d); !ready(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
