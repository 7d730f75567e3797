package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"github.com/spf13/cobra"
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

// commandTarget returns the backend URL that cmd names, checked, and the
// program of argv (none when argv is nil).
func commandTarget(cmd *cobra.Command, argv []string) (backend, path string, err error) {
	backend = backendURL(cmd)
	if err := checkBackendURL(backend); err != nil {
		return "", "", err
	}
	if argv != nil {
		if path, err = commandPath(argv); err != nil {
			return "", "", err
		}
	}
	return backend, path, nil
}

// commandPath finds the program of argv as exec does, or says that the
// command cannot be executed.
func commandPath(argv []string) (string, error) {
	p, err := exec.LookPath(argv[0])
	if err != nil {
		return "", exitWith(exitNoExec, fmt.Errorf("cannot execute %s: %v", argv[0], errors.Unwrap(err)))
	}
	return p, nil
}

// startCommand starts cmd and returns the channel its Wait's error comes
// on. The kernel's parent-death signal follows the thread that started
// the command: that thread is kept, locked, until the command ends.
func startCommand(cmd *exec.Cmd) (<-chan error, error) {
	startc := make(chan error, 1)
	waitc := make(chan error, 1)
	go func() {
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
		return nil, err
	}
	return waitc, nil
}

// termThenKill sends SIGTERM to the command p (to its process group with
// group) and returns the channel on which the time to send SIGKILL comes:
// after grace, if it has not ended by then.
func termThenKill(p *os.Process, group bool, grace time.Duration) <-chan time.Time {
	_ = signalChild(p, sigTerm, group)
	return time.After(grace)
}

// serve runs fn with a context that the first signal on sigc that comes
// while no command runs cancels (signals that come while one runs are
// passed on to it), and returns when fn has: with the exit status of that
// signal, or 0.
func (c *child) serve(sigc <-chan os.Signal, fn func(ctx context.Context)) (sigExit int) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ctx)
	}()
	for {
		select {
		case s := <-sigc:
			if !c.signal(s) && sigExit == 0 {
				sigExit = signalExit(s)
				cancel(signalCause{s})
			}
		case <-done:
			return sigExit
		}
	}
}

// run starts path with argv and env and waits for it. When ctx ends first
// it sends SIGTERM, then SIGKILL after grace, and still waits: the command
// never outlives the run. It returns the command's status (128+S for a
// signal) and whether ctx stopped it.
func (c *child) run(ctx context.Context, path string, argv, env []string, grace time.Duration) (status int, stopped bool, err error) {
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: sysProcAttr(c.group)}
	waitc, err := startCommand(cmd)
	if err != nil {
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
			killc = termThenKill(cmd.Process, c.group, grace)
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
