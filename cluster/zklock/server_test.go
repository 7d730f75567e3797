package zklock

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton/locktest"
)

// Test servers are real ZooKeeper servers (the Debian package's jars), each
// a JVM started on free loopback ports and stopped by PID; the kernel kills
// them too when the test binary exits (Pdeathsig), so a crashed test leaves
// none behind.

const zkClasspath = "/usr/share/java/zookeeper.jar:/usr/share/java/*"

// needServer skips, or fails in CI, when ZooKeeper is not installed.
func needServer(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("zookeeper is not installed (make deps installs it): %v", err)
		}
		t.Skip("zookeeper is not installed; make deps installs it")
	}
	if _, err := exec.LookPath("java"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("java is not installed: %v", err)
		}
		t.Skip("java is not installed")
	}
}

type zkServer struct {
	id    int
	dir   string
	addr  string   // client address
	quorm string   // server.N line, ensembles only
	extra []string // more zoo.cfg lines
	jvm   []string // more JVM flags
	cmd   *exec.Cmd
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tempBase() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// config is the server's zoo.cfg. Ticks of 100 ms allow session timeouts
// from 200 ms, and followers that lose the leader give up after 0.5 s.
func (s *zkServer) config(peers []string) string {
	lines := []string{
		"tickTime=100",
		"initLimit=50",
		"syncLimit=5",
		"dataDir=" + s.dir,
		"clientPort=" + s.addr[strings.LastIndexByte(s.addr, ':')+1:],
		"clientPortAddress=127.0.0.1",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,srvr",
		"minSessionTimeout=200",
		"maxSessionTimeout=60000",
		"forceSync=no",
		"globalOutstandingLimit=10000",
	}
	lines = append(lines, peers...)
	lines = append(lines, s.extra...)
	return strings.Join(lines, "\n") + "\n"
}

func (s *zkServer) start(t testing.TB, peers []string) {
	t.Helper()
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(s.dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(s.config(peers)), 0o644); err != nil {
		t.Fatal(err)
	}
	main := "org.apache.zookeeper.server.ZooKeeperServerMain"
	if len(peers) > 0 {
		main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
		if err := os.WriteFile(filepath.Join(s.dir, "myid"), fmt.Appendf(nil, "%d\n", s.id), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := append([]string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dzookeeper.log.dir=" + s.dir}, s.jvm...)
	cmd := exec.Command("java", append(args, "-cp", zkClasspath, main, cfg)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start zookeeper: %v", err)
	}
	s.cmd = cmd
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

// mode returns the server's mode ("standalone", "leader", "follower"), or
// "" while it does not serve.
func (s *zkServer) mode() string {
	out, err := fourLetter(s.addr, "srvr")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// stop kills the server by PID and reaps it.
func (s *zkServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *zkServer) signal(sig syscall.Signal) {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

var (
	standaloneOnce sync.Once
	standaloneAddr string
	standaloneErr  error
)

// standalone returns the address of the package's standalone server,
// started on first use; it runs until the test binary exits.
func standalone(t testing.TB) string {
	t.Helper()
	needServer(t)
	standaloneOnce.Do(func() {
		dir, err := os.MkdirTemp(tempBase(), "zklock-test-")
		if err != nil {
			standaloneErr = err
			return
		}
		s := &zkServer{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		s.start(t, nil)
		start := time.Now()
		for time.Since(start) < 30*time.Second {
			if out, _ := fourLetter(s.addr, "ruok"); out == "imok" && s.mode() == "standalone" {
				t.Logf("standalone zookeeper on %s ready in %v", s.addr, time.Since(start).Round(time.Millisecond))
				standaloneAddr = s.addr
				// It runs until the tests are done: let go of the
				// process handle (a pidfd) so that the leak check
				// after the tests does not count it, and stop it and
				// remove its data then.
				pid := s.cmd.Process.Pid
				_ = s.cmd.Process.Release()
				locktest.AtExit(func() { stopReleased(pid, dir) })
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.stop()
		standaloneErr = fmt.Errorf("zookeeper on %s not ready after 30 s (log in %s)", s.addr, dir)
	})
	if standaloneErr != nil {
		t.Fatal(standaloneErr)
	}
	return standaloneAddr
}

// ensemble is a set of quorum servers started by a test.
type ensemble struct {
	servers []*zkServer
	peers   []string // server.N lines
}

// startEnsemble starts n servers and waits until each serves; they are
// killed when the test ends.
func startEnsemble(t testing.TB, n int) *ensemble {
	t.Helper()
	needServer(t)
	dir, err := os.MkdirTemp(tempBase(), "zklock-ens-")
	if err != nil {
		t.Fatal(err)
	}
	en := &ensemble{}
	t.Cleanup(func() {
		for _, s := range en.servers {
			s.stop()
		}
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("ensemble logs in %s", dir)
		}
	})
	for i := range n {
		s := &zkServer{id: i + 1, dir: filepath.Join(dir, fmt.Sprint(i+1)), addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		en.peers = append(en.peers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", s.id, freePort(t), freePort(t)))
		en.servers = append(en.servers, s)
	}
	start := time.Now()
	for _, s := range en.servers {
		s.start(t, en.peers)
	}
	en.waitServing(t, 30*time.Second)
	t.Logf("%d-node ensemble ready in %v", n, time.Since(start).Round(time.Millisecond))
	return en
}

// waitServing waits until every running server serves and one leads.
func (en *ensemble) waitServing(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, leaders := true, 0
		for _, s := range en.servers {
			if s.cmd == nil {
				continue
			}
			switch s.mode() {
			case "leader":
				leaders++
			case "follower":
			default:
				ok = false
			}
		}
		if ok && leaders == 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("ensemble not serving after %v", d)
}

// leader returns the index of the server that leads.
func (en *ensemble) leader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, s := range en.servers {
			if s.cmd != nil && s.mode() == "leader" {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader")
	return -1
}

// addrs returns the client addresses of every server.
func (en *ensemble) addrs() []string {
	var out []string
	for _, s := range en.servers {
		out = append(out, s.addr)
	}
	return out
}

func (en *ensemble) url(prefix string) string {
	return "zk://" + strings.Join(en.addrs(), ",") + "/" + prefix
}

// stopReleased stops the server of pid, whose process handle was released,
// and removes its data directory once it has exited (a zombie, or gone:
// the test binary is its parent and reaps it only at exit).
func stopReleased(pid int, dir string) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(b), ')'); err != nil || i >= 0 && strings.HasPrefix(string(b[i:]), ") Z") {
			break
		}
	}
	_ = os.RemoveAll(dir)
}
