package pglock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// One throwaway PostgreSQL instance serves the whole test package. It is run
// by a supervisor, the test binary re-executed with envServer set: the
// supervisor runs initdb, starts postgres as an unprivileged user (postgres
// refuses root) on a free loopback port, and stops it by PID and removes its
// directory when its standard input closes, so nothing outlives the tests
// even when they are killed. It restarts the server on request (fault
// tests).

const envServer = "PGLOCK_TEST_SERVER"

// pgBinDir finds the directory of postgres and initdb.
func pgBinDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(ms) == 0 {
		return "", fmt.Errorf("postgres not found on PATH nor under /usr/lib/postgresql")
	}
	return filepath.Dir(ms[len(ms)-1]), nil
}

// unprivileged returns the credential postgres runs with: nobody when the
// tests run as root, else none (the current user).
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
	if g, err := user.LookupGroup("nogroup"); err == nil {
		gid, _ = strconv.Atoi(g.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

type supervisor struct {
	bin, dir string
	port     int
	cred     *syscall.Credential
	cmd      *exec.Cmd
}

func (s *supervisor) run(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	// The server goes with the supervisor even when the supervisor is
	// killed (SIGQUIT is postgres's immediate shutdown).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	cmd.Stderr = os.Stderr
	return cmd
}

func (s *supervisor) start() error {
	s.cmd = s.run("postgres", "-D", filepath.Join(s.dir, "data"), "-k", s.dir, "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=400", "-c", "shared_buffers=32MB", "-c", "log_min_messages=fatal",
		"-c", "max_locks_per_transaction=256")
	s.cmd.Stderr = nil
	if err := s.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
		if ls := strings.Split(string(b), "\n"); len(ls) > 7 && strings.TrimSpace(ls[7]) == "ready" {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("postgres not ready in 60 s")
}

// stop ends the server by its PID: a fast shutdown, SIGKILL if it hangs.
func (s *supervisor) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	s.cmd = nil
}

// crash ends the server by an immediate shutdown (SIGQUIT): it will run
// crash recovery on its next start, which empties unlogged tables.
func (s *supervisor) crash() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// runServer is the supervisor's main.
func runServer() int {
	fail := func(err error) int { fmt.Println("error", err); return 1 }
	bin, err := pgBinDir()
	if err != nil {
		return fail(err)
	}
	cred, err := unprivileged()
	if err != nil {
		return fail(err)
	}
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	removeStale(base)
	dir, err := os.MkdirTemp(base, "pglock-test-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	s := &supervisor{bin: bin, dir: dir, cred: cred}
	initdb := s.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.Stdout = io.Discard
	if err := initdb.Run(); err != nil {
		return fail(fmt.Errorf("initdb: %w", err))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := s.start(); err != nil {
		return fail(err)
	}
	defer s.stop()
	fmt.Println("ready", s.port)
	// A signal (a test run killed by timeout(1), say) ends the supervisor
	// as the end of its input does, so that the deferred stop runs.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	lines := make(chan string)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			lines <- in.Text()
		}
		close(lines)
	}()
	for {
		select {
		case <-sigs:
			return 1
		case l, ok := <-lines:
			if !ok {
				return 0
			}
			if l == "restart" || l == "crash" {
				if l == "crash" {
					s.crash()
				} else {
					s.stop()
				}
				if err := s.start(); err != nil {
					return fail(err)
				}
				fmt.Println("ok")
			}
		}
	}
}

// removeStale removes the directories of test servers whose supervisor was
// killed before it could: those without a running postmaster.
func removeStale(base string) {
	ds, _ := filepath.Glob(filepath.Join(base, "pglock-test-*"))
	for _, d := range ds {
		b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid"))
		if err == nil {
			if pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0]); err == nil && syscall.Kill(pid, 0) == nil {
				continue
			}
		}
		if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Minute {
			os.RemoveAll(d)
		}
	}
}

// pgServer is the test process's side of the supervisor.
type pgServer struct {
	mu    sync.Mutex
	port  int
	in    io.WriteCloser
	out   *bufio.Reader
	cmd   *exec.Cmd
	noErr error // why there is no server
}

var srv pgServer

// startServer starts the supervisor; TestMain calls it before the leak
// checks take their baseline, so its pipes count as the baseline.
func startServer() {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envServer+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err == nil {
		var out io.ReadCloser
		out, err = cmd.StdoutPipe()
		srv.out = bufio.NewReader(out)
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		srv.noErr = err
		return
	}
	srv.cmd, srv.in = cmd, in
	line, err := srv.out.ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) < 2 || f[0] != "ready" {
		srv.noErr = fmt.Errorf("postgres test server: %q %v", line, err)
		return
	}
	srv.port, _ = strconv.Atoi(f[1])
}

// need returns the server's URL, skipping the test when there is no server
// (failing it in CI).
func need(t testing.TB) string {
	t.Helper()
	if srv.noErr != nil || srv.port == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL server (CI): %v", srv.noErr)
		}
		t.Skipf("no PostgreSQL server: %v", srv.noErr)
	}
	return srv.url()
}

func (s *pgServer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// restart stops the server (fast shutdown) and starts it again on the same
// port and data.
func (s *pgServer) restart(t testing.TB) { s.bounce(t, "restart") }

// crash stops the server as a crash would and starts it again: it
// recovers, and its unlogged tables are empty.
func (s *pgServer) crash(t testing.TB) { s.bounce(t, "crash") }

func (s *pgServer) bounce(t testing.TB, how string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.in, how)
	line, err := s.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ok" {
		t.Fatalf("restart: %q %v", line, err)
	}
}

// adminConn opens a connection of its own to the server, closed when the
// test ends; ctx bounds its statements.
func adminConn(t testing.TB) (context.Context, *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c, err := pgx.Connect(ctx, need(t))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx); cancel() })
	return ctx, c
}

// advisoryKey is the advisory lock key of a name of a kind (default
// prefix).
func advisoryKey(kind baton.Kind, name string) int64 {
	return (&backend{o: lease.Config{Prefix: DefaultPrefix}}).key(kind, name)
}

// admin runs sql on a connection of its own.
func admin(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, c := adminConn(t)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
