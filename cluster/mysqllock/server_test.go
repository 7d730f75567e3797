package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The tests of this package share one throwaway MariaDB (or MySQL) server,
// started on a free loopback port by the first test that needs it and
// stopped by PID when the tests end; a test that restarts the server starts
// one of its own.

func init() {
	// The fault tests kill connections on purpose; the driver would log each.
	_ = mysql.SetLogger(log0{})
}

type log0 struct{}

func (log0) Print(...any) {}

// needServer skips the test when mariadbd is missing, or fails it in CI.
func needServer(t testing.TB) {
	t.Helper()
	if _, _, err := serverBinaries(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MariaDB server not installed (CI): %v", err)
		}
		t.Skipf("MariaDB server not installed: %v", err)
	}
}

// serverBinaries returns the server and the data directory initializer.
func serverBinaries() (server, install string, err error) {
	for _, pair := range [][2]string{{"mariadbd", "mariadb-install-db"}, {"mysqld", "mysql_install_db"}} {
		s, err1 := lookPath(pair[0])
		i, err2 := lookPath(pair[1])
		if err1 == nil && err2 == nil {
			return s, i, nil
		}
	}
	return "", "", fmt.Errorf("neither mariadbd nor mysqld (with its install-db script) found")
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// server is one mariadbd process on loopback with a data directory of its
// own.
type server struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// dataRoot is where data directories go: memory when the machine has it,
// since every acquisition commits a row.
func dataRoot() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// startServer initializes a data directory and starts a server on it; the
// server is stopped when t ends.
func startServer(t testing.TB) *server {
	t.Helper()
	needServer(t)
	dir, err := os.MkdirTemp(dataRoot(), "baton-mysqllock-")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, port: freePort(t), dir: dir}
	t.Cleanup(func() { s.kill(); os.RemoveAll(dir) })
	if err := s.install(); err != nil {
		t.Fatal(err)
	}
	s.start()
	return s
}

// install initializes the data directory.
func (s *server) install() error {
	_, install, _ := serverBinaries()
	out, err := exec.Command(install, "--no-defaults", "--datadir="+filepath.Join(s.dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user="+currentUser(),
		"--innodb-log-file-size=8M").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", install, err, out)
	}
	return nil
}

func (s *server) args() []string {
	return []string{"--no-defaults", "--datadir=" + filepath.Join(s.dir, "data"),
		"--socket=" + filepath.Join(s.dir, "sock"), "--port=" + strconv.Itoa(s.port),
		"--bind-address=127.0.0.1", "--user=" + currentUser(), "--innodb-log-file-size=8M",
		"--skip-name-resolve", "--max-connections=2000", "--log-error=" + filepath.Join(s.dir, "err.log"),
		"--pid-file=" + filepath.Join(s.dir, "pid")}
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

func (s *server) start() {
	s.t.Helper()
	bin, _, _ := serverBinaries()
	s.cmd = exec.Command(bin, s.args()...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	if err := s.waitReady(); err != nil {
		s.t.Fatal(err)
	}
}

// waitReady waits until the server answers a ping.
func (s *server) waitReady() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, err := sql.Open("mysql", s.dsn())
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = db.PingContext(ctx)
			cancel()
			db.Close()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "err.log"))
			return fmt.Errorf("server on %s did not start: %v\n%s", s.addr(), err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the server by its PID, at once.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// restart kills the server and starts it again on the same data.
func (s *server) restart() { s.kill(); s.start() }

func (s *server) dsn() string {
	return "root@tcp(" + s.addr() + ")/mysql?timeout=2s"
}

// url returns the mysql:// URL of the server's database baton, with query.
func (s *server) url(query string) string {
	u := "mysql://root@" + s.addr() + "/baton"
	if query != "" {
		u += "?" + query
	}
	return u
}

// admin returns a pool on the server for the tests' own statements.
func (s *server) admin(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", s.dsn())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// srv is the package's server, started by TestMain; nil when the
// server binaries are missing (the tests then skip, or fail in CI).
var srv *server

// startShared starts the package's server for the life of the test
// process: a shell that waits on a pipe from this process kills the server
// by its PID and removes its data once the pipe closes, which it does when
// the process exits, however it exits.
func startShared() (*server, error) {
	if _, _, err := serverBinaries(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(dataRoot(), "baton-mysqllock-")
	if err != nil {
		return nil, err
	}
	s := &server{t: panicTB{}, dir: dir}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := s.install(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	bin, _, _ := serverBinaries()
	script := `"$@" & pid=$!; echo $pid > "$BATON_DIR/server.pid"; read x; kill -9 $pid; wait $pid; rm -rf "$BATON_DIR"`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh", bin}, s.args()...)...)
	cmd.Env = append(os.Environ(), "BATON_DIR="+dir)
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	r.Close()
	keepPipe = w // closed by the process's exit
	go cmd.Wait()
	if err := s.waitReady(); err != nil {
		w.Close()
		return nil, err
	}
	return s, nil
}

// keepPipe is the write end of the pipe that keeps the shared server alive.
var keepPipe *os.File

// panicTB stands for a test where none is running.
type panicTB struct{ testing.TB }

func (panicTB) Helper()                   {}
func (panicTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (panicTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// sharedServer returns the package's server.
func sharedServer(t testing.TB) *server {
	t.Helper()
	needServer(t)
	if srv == nil {
		t.Fatalf("the package's server did not start: %v", sharedErr)
	}
	return srv
}

var sharedErr error
