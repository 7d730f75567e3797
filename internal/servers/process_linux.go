package servers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

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
	// quit is the signal that asks the server to shut down cleanly
	// (0: SIGTERM); orphan, the one it gets if this process's thread that
	// started it ends first (0: SIGKILL).
	quit, orphan syscall.Signal
	done         chan struct{} // closed once the process is reaped
}

// stopTimeout is how long a server is given to shut down cleanly before
// it is killed.
const stopTimeout = 15 * time.Second

// run starts name; the server gets p.orphan if this process's thread that
// started it ends first.
func run(p *proc, name string, args ...string) (*proc, error) {
	if p == nil {
		p = &proc{}
	}
	if p.orphan == 0 {
		p.orphan = syscall.SIGKILL
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: p.orphan, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		if p.dir != "" {
			os.RemoveAll(p.dir)
		}
		return nil, fmt.Errorf("start %s (install it, or give the URL of a running server): %w", name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
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

// stop asks the server to shut down, as its documentation says to, so
// that it removes what it made outside its data directory (shared memory,
// sockets); a server still running after stopTimeout is killed with its
// process group.
func (p *proc) stop() {
	quit := p.quit
	if quit == 0 {
		quit = syscall.SIGTERM
	}
	_ = p.cmd.Process.Signal(quit)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		// Not yet reaped, so the group's id is still the server's.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
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
