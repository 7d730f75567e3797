//go:build linux

package ipc

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// An ExitWatch calls a function once a process has exited, woken by a
// pidfd in Go's netpoller: no timer, no thread of its own while it waits.
type ExitWatch struct {
	f    *os.File
	done sync.WaitGroup
}

// NotifyExit calls fn (once, in a goroutine of its own) when the process
// that has pid and whose start time has the low bits tag&mask has exited:
// all its threads are gone, so it will never touch shared memory again. It
// returns dead true, and calls nothing, when that process is gone already
// (no such pid, a zombie, or a later process with the pid). Without pidfds
// (kernels before 5.3) it returns an error matching errors.ErrUnsupported.
func NotifyExit(pid int, tag, mask uint32, fn func()) (w *ExitWatch, dead bool, err error) {
	if pid <= 0 {
		return nil, true, nil
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil, true, nil
	}
	if errors.Is(err, unix.ENOSYS) {
		return nil, false, errors.ErrUnsupported
	}
	if err != nil {
		return nil, false, os.NewSyscallError("pidfd_open", err)
	}
	// The pidfd names whatever process has pid now: check that it is the
	// recorded one, and not exited already.
	p, state, ok, err := LookupProc(pid)
	if err != nil || !ok || uint32(p.Start)&mask != tag&mask || state == 'Z' || state == 'X' || exited(fd) {
		unix.Close(fd)
		return nil, err == nil, err
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	w = &ExitWatch{f: f}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		var gone bool
		// Read returns once the pidfd is readable (the process exited) or
		// the file is closed (Stop).
		if rc.Read(func(fd uintptr) bool { gone = exited(int(fd)); return gone }) == nil && gone {
			fn()
		}
	}()
	return w, false, nil
}

// exited reports whether the pidfd fd is readable: its process exited.
func exited(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// Stop ends the watch and waits for its goroutine: fn is not called after
// Stop returns (unless it was running already, and then it has returned).
// Stopping nil or twice is a no-op.
func (w *ExitWatch) Stop() {
	if w == nil {
		return
	}
	w.f.Close()
	w.done.Wait()
}

// WaitExit blocks until the process that has pid and whose start time has
// the low 32 bits tag has exited, and returns nil; at once when there is no
// such process (it was reaped, or pid now names a later process). When ctx
// ends first it returns ctx's error. It waits as NotifyExit does, at no
// CPU cost; on a kernel without pidfds (before Linux 5.3) it reads
// /proc/PID/stat every WatchEvery instead.
func WaitExit(ctx context.Context, pid int, tag uint32) error {
	gone := make(chan struct{})
	w, dead, err := NotifyExit(pid, tag, ^uint32(0), func() { close(gone) })
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return waitExitPolling(ctx, pid, tag)
	case err != nil:
		return err
	case dead:
		return nil
	}
	defer w.Stop()
	select {
	case <-gone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitExitPolling is WaitExit for kernels without pidfds.
func waitExitPolling(ctx context.Context, pid int, tag uint32) error {
	w, dead, err := WatchProc(pid, tag)
	if err != nil {
		return err
	}
	if dead {
		return nil
	}
	defer w.Close()
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if dead, err := w.Dead(); err != nil || dead {
			return err
		}
	}
}
