// Package servers starts throwaway servers for the examples and their
// tests: redis-server, an embedded etcd, PostgreSQL, MariaDB and
// ZooKeeper, each on a free loopback port with a data directory of its
// own, stopped by its PID as the server asks to be (PostgreSQL's fast
// shutdown, SIGTERM for the others), so that it leaves no shared memory
// behind; one that does not stop in time is killed.
package servers

import (
	"fmt"
	"net"
	"os"
	"strconv"
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

// dataDir makes a data directory, in memory where the machine has it.
func dataDir(prefix string) (string, error) {
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	return os.MkdirTemp(base, "baton-"+prefix+"-")
}
