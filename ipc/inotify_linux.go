//go:build linux

package ipc

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The process's inotify instance, which follows the files of watched
// handles (PathChecker): one descriptor, read by a goroutine parked in
// Go's poller.
var inotify struct {
	tried bool // guarded by watcher.mu
	fd    int  // -1: none (the limit of instances, or no inotify)
	f     *os.File
	wds   map[int][]*Watch // guarded by watcher.mu
	// byIno and inoOf map the files that an InodeChecker follows to
	// their watch descriptors and back; guarded by watcher.mu.
	byIno map[[2]uint64]int
	inoOf map[int][2]uint64
	// closers are rung when a file description of the watched file is
	// released (WakeOnClose), by watch descriptor; guarded by watcher.mu.
	closers map[int][]interface{ Ring() }
}

// inotifyMask: the link count changed (removed, or renamed over), or the
// file itself was moved or freed.
const inotifyMask = unix.IN_ATTRIB | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF

// closeMask: a file description of the file was released.
const closeMask = unix.IN_CLOSE_WRITE | unix.IN_CLOSE_NOWRITE

// inotifyAdd follows pc's file for w and returns the watch descriptor, or
// -1 when inotify cannot (w is then checked every WatchEvery). Called with
// watcher.mu held.
func inotifyAdd(pc PathChecker, w *Watch) int {
	ic, byIno := pc.(InodeChecker)
	var key [2]uint64
	if byIno {
		key[0], key[1] = ic.WatchedInode()
		if wd, ok := inotify.byIno[key]; ok {
			inotify.wds[wd] = append(inotify.wds[wd], w)
			return wd
		}
	}
	if !inotify.tried {
		inotify.tried = true
		inotify.fd = -1
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return -1
		}
		inotify.fd, inotify.f = fd, os.NewFile(uintptr(fd), "inotify")
		inotify.wds = map[int][]*Watch{}
		inotify.byIno, inotify.inoOf = map[[2]uint64]int{}, map[int][2]uint64{}
		go inotifyRead(inotify.f)
	}
	if inotify.fd < 0 {
		return -1
	}
	wd, err := unix.InotifyAddWatch(inotify.fd, pc.WatchedPath(), inotifyMask)
	if err != nil {
		return -1
	}
	inotify.wds[wd] = append(inotify.wds[wd], w)
	if _, known := inotify.inoOf[wd]; byIno && !known {
		// A later checker of this inode shares wd, as a watch by path
		// would: both follow what the path named at the first watch.
		inotify.byIno[key], inotify.inoOf[wd] = wd, key
	}
	return wd
}

// inotifyRemove ends w's use of wd. Called with watcher.mu held.
func inotifyRemove(wd int, w *Watch) {
	ws := dropOne(inotify.wds[wd], w)
	if len(ws) > 0 {
		inotify.wds[wd] = ws
		return
	}
	delete(inotify.wds, wd)
	delete(inotify.closers, wd)
	if key, ok := inotify.inoOf[wd]; ok {
		delete(inotify.inoOf, wd)
		delete(inotify.byIno, key)
	}
	_, _ = unix.InotifyRmWatch(inotify.fd, uint32(wd))
}

// dropOne removes the first x from s, order not kept.
func dropOne[T comparable](s []T, x T) []T {
	for i, y := range s {
		if y == x {
			var zero T
			s[i] = s[len(s)-1]
			s[len(s)-1] = zero
			return s[:len(s)-1]
		}
	}
	return s
}

// inotifyClose closes the instance, which follows no file any more, with
// the watcher's goroutine. Called with watcher.mu held.
func inotifyClose() {
	if inotify.f != nil {
		inotify.f.Close()
	}
	inotify.tried, inotify.fd, inotify.f, inotify.wds = false, -1, nil, nil
	inotify.byIno, inotify.inoOf, inotify.closers = nil, nil, nil
}

// inotifyRead checks the registrations of every file an event names.
func inotifyRead(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	var buf [4096]byte
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf[:])
			return rerr != unix.EAGAIN
		})
		if err != nil || rerr != nil {
			if rerr == unix.EINTR {
				continue
			}
			return
		}
		var ws []*Watch
		var rs []interface{ Ring() }
		watcher.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				// Events were dropped: look at everything.
				for _, l := range inotify.wds {
					ws = append(ws, l...)
				}
				for _, l := range inotify.closers {
					rs = append(rs, l...)
				}
			case ev.Mask&closeMask != 0:
				rs = append(rs, inotify.closers[int(ev.Wd)]...)
			default:
				ws = append(ws, inotify.wds[int(ev.Wd)]...)
			}
		}
		cs := make([]Checker, len(ws))
		for i, w := range ws {
			cs[i] = w.c
		}
		watcher.mu.Unlock()
		for _, r := range rs {
			r.Ring()
		}
		checkWatches(ws, cs)
	}
}

// WakeOnClose rings r whenever any process releases a file description of
// the file that w follows (its last close of it, or its exit), until stop
// is called: a waiter for a flock learns that a dying holder's lock went
// with its files, without waiting for the rest of its exit. w must be
// started on an InodeChecker. It reports false, and rings nothing, when
// inotify does not follow w's file.
func (w *Watch) WakeOnClose(r interface{ Ring() }) (stop func(), ok bool) {
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	pc, _ := w.c.(InodeChecker)
	wd := w.wd
	if pc == nil || wd < 0 {
		return nil, false
	}
	if len(inotify.closers[wd]) == 0 {
		// The mask of the process's one watch of the inode grows by the
		// close events while someone here waits for them.
		if _, err := unix.InotifyAddWatch(inotify.fd, pc.WatchedPath(), inotifyMask|closeMask); err != nil {
			return nil, false
		}
	}
	if inotify.closers == nil {
		inotify.closers = map[int][]interface{ Ring() }{}
	}
	inotify.closers[wd] = append(inotify.closers[wd], r)
	return func() {
		watcher.mu.Lock()
		defer watcher.mu.Unlock()
		rs := dropOne(inotify.closers[wd], r)
		inotify.closers[wd] = rs
		if len(rs) == 0 {
			delete(inotify.closers, wd)
			if w.c != nil && w.wd == wd {
				_, _ = unix.InotifyAddWatch(inotify.fd, pc.WatchedPath(), inotifyMask)
			}
		}
	}, true
}

// Named reports whether path names the file dev/ino and that file is
// linked. The link count matters: the kernel reports an unlink to inotify
// before it drops the name from its cache, so a check woken by the event
// can still find the unlinked file under its old path.
func Named(path string, dev, ino uint64) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && uint64(st.Dev) == dev && st.Ino == ino && st.Nlink > 0
}
