//go:build linux

package ipc

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The exit watches of the process: one pidfd per watched process, shared
// by every subscriber of this process that watches it (its Waiters and
// the watches of NotifyExit), and followed by Go's network poller, so that
// a watch costs a parked goroutine and no CPU until the process exits.

// procKey names a watched process; group watches wait for every thread
// of it to exit (see Waiter.WatchExit and NotifyExit), the others for its
// main thread.
type procKey struct {
	pid   int
	tag   uint32
	mask  uint32 // the bits of the start time that tag holds
	group bool
}

// fullTag is the mask of a tag that holds the start time's low 32 bits.
const fullTag = ^uint32(0)

// is reports whether a process started at start is the one k names.
func (k procKey) is(start uint64) bool { return uint32(start)&k.mask == k.tag&k.mask }

// A ringer is told of the exit by a call of ring, once, from the watch's
// goroutine; ring must not block (a Waiter's wakes a futex).
type ringer interface{ ring() }

type exitWatch struct {
	key  procKey
	f    *os.File
	dead bool                // guarded by exits.mu: the process has exited
	subs map[ringer]struct{} // guarded by exits.mu
}

var exits struct {
	mu sync.Mutex
	m  map[procKey]*exitWatch // guarded by mu
}

var (
	noPidfd       atomic.Bool // pidfd_open returned ENOSYS
	noPidfdThread atomic.Bool // pidfd_open refused PIDFD_THREAD (before Linux 6.9)
)

// errNoPidfd means that the kernel has no pidfd_open (before Linux 5.3):
// waiters then look at the watched processes after each sleep slice.
var errNoPidfd = fmt.Errorf("ipc: pidfd_open: %w", errors.ErrUnsupported)

// subscribe makes w rung when the process k exits. dead is true (and
// nothing subscribed) when it has exited already, is exiting, or k's pid
// is another process now.
// A group watch subscribes a process that is exiting but has not exited
// yet (its files not closed, its flocks still held) too.
func subscribe(k procKey, w ringer) (e *exitWatch, dead bool, err error) {
	exits.mu.Lock()
	if e := exits.m[k]; e != nil {
		defer exits.mu.Unlock()
		if e.dead {
			return nil, true, nil
		}
		e.subs[w] = struct{}{}
		return e, false, nil
	}
	exits.mu.Unlock()
	if noPidfd.Load() {
		return nil, false, errNoPidfd
	}
	f, dead, err := openPidfd(k)
	if err == errNoPidfd {
		noPidfd.Store(true)
	}
	if err != nil || dead {
		return nil, dead, err
	}
	exits.mu.Lock()
	if old := exits.m[k]; old != nil {
		// Another waiter of this process opened one meanwhile.
		dead := old.dead
		if !dead {
			old.subs[w] = struct{}{}
		}
		exits.mu.Unlock()
		f.Close()
		if dead {
			return nil, true, nil
		}
		return old, false, nil
	}
	if exits.m == nil {
		exits.m = map[procKey]*exitWatch{}
	}
	e = &exitWatch{key: k, f: f, subs: map[ringer]struct{}{w: {}}}
	exits.m[k] = e
	exits.mu.Unlock()
	go e.wait()
	return e, false, nil
}

// unsubscribe ends w's watch of e, if any; the last one closes the
// pidfd, which ends e's goroutine.
func unsubscribe(e *exitWatch, w ringer) {
	exits.mu.Lock()
	if _, ok := e.subs[w]; !ok {
		exits.mu.Unlock()
		return
	}
	delete(e.subs, w)
	last := len(e.subs) == 0
	if last && exits.m[e.key] == e {
		delete(exits.m, e.key)
	}
	exits.mu.Unlock()
	if last {
		e.f.Close()
	}
}

// exited reports whether e's process has exited (guarded read).
func (e *exitWatch) exited() bool {
	exits.mu.Lock()
	defer exits.mu.Unlock()
	return e.dead
}

// wait parks until the pidfd is readable (the process exited) or closed
// (the last subscriber left), and rings the subscribers in the first case.
func (e *exitWatch) wait() {
	rc, err := e.f.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool { return pidfdExited(int(fd)) })
	}
	if err != nil {
		if errors.Is(err, os.ErrClosed) {
			return
		}
		// Not pollable through the runtime: block this goroutine's thread
		// in poll(2) instead.
		if err := e.blockingWait(); err != nil {
			return
		}
	}
	exits.mu.Lock()
	e.dead = true
	subs := make([]ringer, 0, len(e.subs))
	for w := range e.subs {
		subs = append(subs, w)
	}
	exits.mu.Unlock()
	for _, w := range subs {
		w.ring()
	}
}

func (e *exitWatch) blockingWait() error {
	rc, err := e.f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, perr = unix.Poll(fds, -1)
			if perr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return perr
}

// pidfdExited reports whether the process of a pidfd has exited: the
// pidfd polls readable from then on.
func pidfdExited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
	}
}

// openPidfd opens a pidfd of process k, non-blocking so that the runtime
// polls it. The pid is checked against k's start time after the open:
// if it matches, the pidfd refers to k's process (or to one that exited
// before k started, which polls readable at once: a spurious wake-up).
//
// A watch of the main thread (not k.group) ends when that thread exits:
// once SIGKILLed, a process is dead for the locks (see ProcWatch.Dead),
// and its main thread exits without waiting for the others, nor, unless
// it is the last, for the teardown of the memory, which may take long.
func openPidfd(k procKey) (*os.File, bool, error) {
	var (
		fd  int
		err error = unix.EINVAL
	)
	if !k.group && !noPidfdThread.Load() {
		fd, err = unix.PidfdOpen(k.pid, unix.PIDFD_NONBLOCK|unix.PIDFD_THREAD)
		if err == unix.EINVAL {
			// Before Linux 6.9: the whole process is watched.
			noPidfdThread.Store(true)
		}
	}
	if k.group || noPidfdThread.Load() {
		fd, err = unix.PidfdOpen(k.pid, unix.PIDFD_NONBLOCK)
	}
	if err == unix.EINVAL {
		// Before Linux 5.10: no PIDFD_NONBLOCK flag.
		if fd, err = unix.PidfdOpen(k.pid, 0); err == nil {
			err = unix.SetNonblock(fd, true)
			if err != nil {
				unix.Close(fd)
			}
		}
	}
	switch {
	case err == unix.ESRCH:
		return nil, true, nil
	case err == unix.ENOSYS:
		return nil, false, errNoPidfd
	case err != nil:
		return nil, false, fmt.Errorf("ipc: pidfd_open %d: %w", k.pid, err)
	}
	st, flags, start, err := readStatFlags(k.pid)
	if err != nil {
		unix.Close(fd)
		return nil, false, err
	}
	gone := dying(st, flags)
	if k.group {
		// A zombie main thread may wait for other threads still
		// exiting, which keep the files open: the pidfd tells when the
		// last one has gone.
		gone = st == 0
	}
	if gone || !k.is(start) || pidfdExited(fd) {
		unix.Close(fd)
		return nil, true, nil
	}
	return os.NewFile(uintptr(fd), "pidfd"), false, nil
}
