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
