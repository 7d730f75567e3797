//go:build linux

package ipc

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// WaitExit blocks until the process that has pid and whose start time has
// the low 32 bits tag has exited, and returns nil; at once when there is no
// such process (it was reaped, or pid now names a later process). When ctx
// ends first it returns ctx's error.
//
// It sleeps in Go's netpoller on a pidfd of the process, which becomes
// readable when the process exits, so a wait costs no CPU and ends at the
// exit, not at the next tick of a timer. On a kernel without pidfds
// (before Linux 5.3) it falls back to reading /proc/PID/stat every
// WatchEvery.
func WaitExit(ctx context.Context, pid int, tag uint32) error {
	if pid <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return waitExitPolling(ctx, pid, tag)
	}
	// The pidfd names whoever has pid now: it is the process recorded
	// only if its start time matches, checked after the open. (A zombie
	// or an exiting process is waited for: its pidfd becomes readable
	// once it has exited.)
	if p, _, ok, err := LookupProc(pid); err == nil && (!ok || p.Tag() != tag) {
		unix.Close(fd)
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return waitExitPolling(ctx, pid, tag)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		// Not in the netpoller.
		return waitExitPolling(ctx, pid, tag)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return waitExitPolling(ctx, pid, tag)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, 0)
		exited = n > 0
		return exited
	})
	if exited {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return err
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
