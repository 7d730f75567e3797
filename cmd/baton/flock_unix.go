//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
)

// flock(1) interoperation: "baton run /path CMD" (or --file PATH) and
// "baton lock /path" take flock(2) on the file itself, as flock(1) does,
// so that they exclude flock(1) users and scripts of the same file; "baton
// lock --fd N" and "-u" lock and unlock a descriptor the shell holds.

// flockFile takes flock(2) on r.file, opened (created if missing, as
// flock(1) does) by baton and close-on-exec: the command inherits nothing,
// and the lock goes with baton. The blocking wait is the kernel's: a
// goroutine sleeps in flock(2), and when ctx ends first the descriptor
// is left to it, closed (and a late lock dropped) once flock returns or
// with the process.
func flockFile(ctx context.Context, r *request) (held, error) {
	fd, err := unix.Open(r.file, unix.O_RDONLY|unix.O_NOCTTY|unix.O_CREAT|unix.O_CLOEXEC, 0o666)
	if errors.Is(err, unix.EISDIR) {
		fd, err = unix.Open(r.file, unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return held{}, exitWith(exitBackend, fmt.Errorf("cannot open %s: %v", r.file, err))
	}
	how := unix.LOCK_EX
	if r.shared {
		how = unix.LOCK_SH
	}
	if r.nonblock {
		err := flockRetry(fd, how|unix.LOCK_NB)
		if err != nil {
			unix.Close(fd)
			if errors.Is(err, unix.EWOULDBLOCK) {
				return held{}, baton.ErrLocked
			}
			return held{}, exitWith(exitBackend, fmt.Errorf("flock %s: %v", r.file, err))
		}
		return fileHeld(fd), nil
	}
	done := make(chan error) // unbuffered: handed over, or the goroutine closes fd
	abandoned := make(chan struct{})
	go func() {
		err := flockRetry(fd, how)
		select {
		case done <- err:
		case <-abandoned:
			unix.Close(fd) // drops a lock taken too late
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			unix.Close(fd)
			return held{}, exitWith(exitBackend, fmt.Errorf("flock %s: %v", r.file, err))
		}
		return fileHeld(fd), nil
	case <-ctx.Done():
		close(abandoned)
		select {
		case err := <-done: // granted as ctx ended: give it back
			if err == nil {
				_ = unix.Flock(fd, unix.LOCK_UN)
			}
			unix.Close(fd)
		default:
		}
		return held{}, context.Cause(ctx)
	}
}

// flockRetry is flock(2), again when a signal interrupted it.
func flockRetry(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// fileHeld is a flock held on fd: it has no fencing token and is lost
// only with baton.
func fileHeld(fd int) held {
	return held{release: func(context.Context) error {
		err := unix.Flock(fd, unix.LOCK_UN)
		return errors.Join(err, unix.Close(fd))
	}}
}

// lockFD is "baton lock --fd N" and "baton lock -u --fd N": flock(2) on a
// descriptor that baton inherited from the shell, whose open file
// description outlives baton, so the lock stays with the shell's
// descriptor after baton exits, as with flock(1) N.
//
// A blocking wait that -w or a signal may end runs in a child baton
// (the same command without -w), killed when the wait ends: a flock(2)
// call cannot be cancelled, and the lock must not be granted to the
// shell's descriptor after baton gave up. Once the child is reaped no
// request is pending, and one non-blocking try decides: granted (to the
// child in its last moment, or free now) is success, else busy.
func lockFD(f *runFlags, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return usageErrorf("--fd %d: %v", fd, err)
	}
	if f.flock.unlock {
		if err := unix.Flock(fd, unix.LOCK_UN); err != nil {
			return exitWith(exitBackend, fmt.Errorf("unlock fd %d: %v", fd, err))
		}
		return nil
	}
	how := unix.LOCK_EX
	if f.shared {
		how = unix.LOCK_SH
	}
	nb := f.nonblock || f.timeout.set && f.timeout.d == 0
	if nb || !f.timeout.set && os.Getenv(envFDChild) != "" {
		if nb {
			how |= unix.LOCK_NB
		}
		err := flockRetry(fd, how)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return exitWith(f.conflict, nil)
		}
		return exitWith(exitBackend, fmt.Errorf("flock fd %d: %v", fd, err))
	}
	self, err := os.Executable()
	if err != nil {
		return exitWith(exitBackend, err)
	}
	args := []string{"lock", "--fd", strconv.Itoa(fd)}
	if f.shared {
		args = append(args, "-s")
	}
	c := exec.Command(self, args...)
	c.Env = append(os.Environ(), envFDChild+"=1")
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	if fd > 2 {
		c.ExtraFiles = make([]*os.File, fd-2)
		c.ExtraFiles[fd-3] = os.NewFile(uintptr(fd), "lock")
	}
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, caughtSignals...)
	defer signal.Stop(sigc)
	if err := c.Start(); err != nil {
		return exitWith(exitBackend, err)
	}
	waitc := make(chan error, 1)
	go func() { waitc <- c.Wait() }()
	var timeout <-chan time.Time
	if f.timeout.set {
		timeout = time.After(f.timeout.d)
	}
	sigExit := 0
	select {
	case err := <-waitc:
		var xe *exec.ExitError
		if errors.As(err, &xe) {
			return exitWith(xe.ExitCode(), nil)
		}
		if err == nil {
			return nil
		}
		return exitWith(exitBackend, err)
	case s := <-sigc:
		sigExit = signalExit(s)
	case <-timeout:
	}
	_ = c.Process.Kill()
	<-waitc
	err = flockRetry(fd, how|unix.LOCK_NB)
	switch {
	case sigExit != 0:
		if err == nil {
			_ = unix.Flock(fd, unix.LOCK_UN) // interrupted: hold nothing
		}
		return exitWith(sigExit, nil)
	case err == nil:
		return nil
	case errors.Is(err, unix.EWOULDBLOCK):
		if f.verbose {
			fmt.Fprintf(os.Stderr, "baton: fd %d is locked; gave up after %v\n", fd, f.timeout.d)
		}
		return exitWith(f.conflict, nil)
	}
	return exitWith(exitBackend, fmt.Errorf("flock fd %d: %v", fd, err))
}

// envFDChild marks the child baton of lockFD, which waits unbounded.
const envFDChild = "BATON_FLOCK_FD_CHILD"
