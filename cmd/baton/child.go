package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// child is a command that a recipe runs (run --at-most-every, elect --):
// started with a context, stopped (SIGTERM, SIGKILL after a grace) when
// the context ends, and handed the signals baton receives meanwhile.
type child struct {
	fg, group bool

	mu sync.Mutex
	p  *os.Process // guarded by mu; nil before the start and after the end
}

func newChild() *child {
	fg := inForeground()
	return &child{fg: fg, group: !fg}
}

// run starts path with argv and env and waits for it. When ctx ends first
// it sends SIGTERM, then SIGKILL after grace, and still waits: the command
// never outlives the run. It returns the command's status (128+S for a
// signal) and whether ctx stopped it.
func (c *child) run(ctx context.Context, path string, argv, env []string, grace time.Duration) (status int, stopped bool, err error) {
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: sysProcAttr(c.group)}
	startc := make(chan error, 1)
	waitc := make(chan error, 1)
	go func() {
		// The parent-death signal follows the thread that started the
		// command: keep that thread until the command ends.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			startc <- err
			return
		}
		startc <- nil
		waitc <- cmd.Wait()
	}()
	if err := <-startc; err != nil {
		return 0, false, err
	}
	c.mu.Lock()
	c.p = cmd.Process
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.p = nil
		c.mu.Unlock()
	}()
	done := ctx.Done()
	var killc <-chan time.Time
	for {
		select {
		case <-done:
			done, stopped = nil, true
			_ = signalChild(cmd.Process, sigTerm, c.group)
			killc = time.After(grace)
		case <-killc:
			_ = signalChild(cmd.Process, sigKill, c.group)
		case err := <-waitc:
			var xe *exec.ExitError
			switch {
			case err == nil:
				return 0, stopped, nil
			case errors.As(err, &xe):
				return exitStatus(xe.ProcessState), stopped, nil
			}
			return 0, stopped, err
		}
	}
}

// signal passes sig on to the command and reports true, or reports false
// when no command runs.
func (c *child) signal(sig os.Signal) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p == nil {
		return false
	}
	if !(c.fg && fromTerminal(sig)) { // else the terminal sent it already
		_ = signalChild(c.p, sig, c.group)
	}
	return true
}
