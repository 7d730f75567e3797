//go:build linux

package filelock

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/ipc"
)

// OpenMutexIn is OpenMutex for a lock file of the namespace ns, which
// goes when idle: the last handle of the process on the path to close
// removes the file if nobody holds it (a flock taken without waiting),
// first raising the namespace's token floor to the file's last token, from
// which a later file of the name counts on. Handles of other processes
// still open on the removed file, and waiters, find it unlinked at their
// next acquisition and move to the file the path names then, as after a
// removal.
func OpenMutexIn(ns *ipc.Namespace, path string) (*Mutex, error) {
	floor, err := ipc.TokenFloor(ns)
	if err != nil {
		return nil, fmt.Errorf("filelock: %w", err)
	}
	m, err := OpenMutex(path)
	if err != nil {
		return nil, err
	}
	m.lf.floor = floor
	m.reclaim = true
	opens.add(path, 1)
	return m, nil
}

// opens counts the handles of OpenMutexIn per path in this process: a
// handle reclaims only once no other one here has the file open.
var opens = pathCounts{n: map[string]int{}}

type pathCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *pathCounts) add(path string, d int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n[path] + d
	if n == 0 {
		delete(c.n, path)
	} else {
		c.n[path] = n
	}
	return n
}

// reclaim removes the lock file of lf when nobody holds it and it is
// still the path's, with the floor raised first; the caller closes lf
// after (which drops the flock taken here).
func reclaim(lf *lockFile) {
	if opens.add(lf.path, -1) != 0 || lf.floor == nil {
		return
	}
	if unix.Flock(lf.fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	// A waiter that tried while this flock was held sleeps until the
	// release generation moves: give the flock back first, then move it,
	// whether the file went or not (sleepers on a removed file retry, find
	// it unlinked and move on to the path's new file).
	defer func() {
		_ = unix.Flock(lf.fd, unix.LOCK_UN)
		released(lf.pg)
	}()
	if !lf.current() {
		return
	}
	ipc.RaiseFloor(lf.floor, lf.pg.token.Load())
	_ = unix.Unlink(lf.path)
}
