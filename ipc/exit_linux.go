//go:build linux

package ipc

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// An ExitWatch calls a function once a process has exited. It is a
// subscriber of the process's shared exit watch (one pidfd in Go's
// netpoller per watched process, see exitWatch): no timer, no thread of
// its own while it waits.
type ExitWatch struct {
	e     *exitWatch
	fn    func()
	state atomic.Uint32 // armed, then fired or stopped
	done  chan struct{} // closed once fn has returned, when fired
}

const (
	watchArmed uint32 = iota
	watchFired
	watchStopped
)

// NotifyExit calls fn (once, in a goroutine of its own) when the process
// that has pid and whose start time has the low bits tag&mask has exited:
// all its threads are gone, so it will never touch shared memory again. It
// returns dead true, and calls nothing, when that process is gone already
// (no such pid, exited, or a later process with the pid). Without pidfds
// (kernels before 5.3) it returns an error matching errors.ErrUnsupported.
func NotifyExit(pid int, tag, mask uint32, fn func()) (w *ExitWatch, dead bool, err error) {
	if pid <= 0 {
		return nil, true, nil
	}
	p, _, ok, err := LookupProc(pid)
	if err != nil || !ok || uint32(p.Start)&mask != tag&mask {
		return nil, err == nil, err
	}
	// The watch is keyed by the whole tag, so that this watch shares the
	// pidfd of the process with its Waiters' group watches.
	w = &ExitWatch{fn: fn, done: make(chan struct{})}
	e, dead, err := subscribe(procKey{pid: pid, tag: p.Tag(), mask: fullTag, group: true}, w)
	if err != nil || dead {
		return nil, dead, err
	}
	w.e = e
	return w, false, nil
}

// ring is called by the exit watch at the exit.
func (w *ExitWatch) ring() {
	if w.state.CompareAndSwap(watchArmed, watchFired) {
		go func() {
			defer close(w.done)
			w.fn()
		}()
	}
}

// Stop ends the watch: fn is not called after Stop returns (unless it was
// running already, and then it has returned). Stopping nil or twice is a
// no-op.
func (w *ExitWatch) Stop() {
	if w == nil {
		return
	}
	unsubscribe(w.e, w)
	if !w.state.CompareAndSwap(watchArmed, watchStopped) && w.state.Load() == watchFired {
		<-w.done
	}
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
