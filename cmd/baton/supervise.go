package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/batonlock/baton"
)

// Running the command while the hold lasts, and giving it back.

// closeBackend closes b, waiting at most d: an unreachable server must not
// keep baton alive.
func closeBackend(b baton.Backend, d time.Duration) {
	_ = bounded(d, func(context.Context) error { return b.Close() })
}

// bounded runs fn with a context of timeout d and returns its error, or
// gives up on it after d (leaving it to finish in the background).
func bounded(d time.Duration, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// supervise runs the command while h is held, passes signals on, stops the
// command if the hold is lost, and releases h when the command has ended.
// closeBound is set to how long the backend may take to close afterwards.
func supervise(r *request, f *runFlags, h held, sigc <-chan os.Signal, closeBound *time.Duration) error {
	fg := inForeground()
	group := !fg
	childURL, childEnv := childBackend(r.backend)
	c := &exec.Cmd{
		Path:   r.path,
		Args:   r.argv,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Env: append(append(os.Environ(),
			"BATON_NAME="+r.name,
			"BATON_TOKEN="+strconv.FormatUint(uint64(h.hold.Token()), 10),
			"BATON_BACKEND="+childURL), childEnv...),
		SysProcAttr: sysProcAttr(group),
	}
	waitc, err := startCommand(c)
	lost := false
	release := func() error {
		// Once the hold is known lost, a release only tidies up what
		// the lease would expire anyway: do not wait long for it.
		d := releaseTimeout
		if lost {
			d = lostReleaseTimeout
		}
		return bounded(d, h.release)
	}
	if err != nil {
		_ = release()
		return exitWith(exitNoExec, fmt.Errorf("cannot execute %s: %v", r.argv[0], err))
	}

	lostc := h.hold.Lost()
	var killc <-chan time.Time
	var waitErr error
run:
	for {
		select {
		case s := <-sigc:
			if fg && fromTerminal(s) {
				continue // the terminal sent it to the command already
			}
			_ = signalChild(c.Process, s, group)
		case <-lostc:
			lostc, lost = nil, true
			*closeBound = lostReleaseTimeout
			msg := fmt.Sprintf("baton: %s was lost: %s", describe(r), errText(h.hold.Err()))
			switch f.onLost {
			case "term":
				fmt.Fprintf(os.Stderr, "%s; sending SIGTERM to the command (SIGKILL in %v)\n", msg, r.grace)
				killc = termThenKill(c.Process, group, r.grace)
			case "kill":
				fmt.Fprintf(os.Stderr, "%s; killing the command\n", msg)
				_ = signalChild(c.Process, sigKill, group)
			default:
				fmt.Fprintf(os.Stderr, "%s; the command goes on (--on-lost=ignore)\n", msg)
			}
		case <-killc:
			killc = nil
			_ = signalChild(c.Process, sigKill, group)
		case waitErr = <-waitc:
			break run
		}
	}
	status := 0
	var xe *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &xe):
		status = exitStatus(xe.ProcessState)
	default:
		_ = release()
		return exitWith(exitBackend, fmt.Errorf("waiting for the command: %v", waitErr))
	}
	if err := release(); err != nil {
		if errors.Is(err, baton.ErrLost) {
			if !lost {
				fmt.Fprintf(os.Stderr, "baton: %s was lost while the command ran: %s\n", describe(r), errText(err))
			}
			lost = true
		} else {
			fmt.Fprintf(os.Stderr, "baton: releasing %s: %s\n", describe(r), errText(err))
		}
	}
	if lost {
		*closeBound = lostReleaseTimeout
		return exitWith(exitLost, nil)
	}
	if status != 0 {
		return exitWith(status, nil)
	}
	return nil
}
