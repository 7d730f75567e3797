//go:build linux

package filelock

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/ipc"
)

// watchHolders makes w's sleeps end when a process that holds a flock of
// the file open as fd exits (the kernel drops its lock then, and nobody
// bumps the release generation), and reports whether one has exited
// already (its lock is released then). The holders are read from /proc/locks, which lists every flock
// with the pid of the process that took it and the inode of its file.
func watchHolders(fd int, w *ipc.Waiter) (dead bool) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	self := os.Getpid()
	forEachHolder(locks, st.Ino, func(pid int) {
		if pid == self || dead {
			return
		}
		dead = w.WatchExit(pid)
	})
	return dead
}

// forEachHolder calls fn with the pid of every flock held (not waited for)
// on inode ino in the text of /proc/locks, whose lines read
// "1: FLOCK  ADVISORY  WRITE 4242 00:1a:1234 0 EOF", a waiter's with
// "->" after the number.
func forEachHolder(locks []byte, ino uint64, fn func(pid int)) {
	for len(locks) > 0 {
		line := locks
		if i := bytes.IndexByte(locks, '\n'); i >= 0 {
			line, locks = locks[:i], locks[i+1:]
		} else {
			locks = nil
		}
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[1]) != "FLOCK" {
			continue
		}
		id := f[5]
		i := bytes.LastIndexByte(id, ':')
		if i < 0 {
			continue
		}
		if n, err := strconv.ParseUint(string(id[i+1:]), 10, 64); err != nil || n != ino {
			continue
		}
		if pid, err := strconv.Atoi(string(f[4])); err == nil && pid > 0 {
			fn(pid)
		}
	}
}

// onNFS reports whether fd is a file on NFS, whose locks other machines
// may hold: their release wakes nobody here.
func onNFS(fd int) bool {
	var fs unix.Statfs_t
	return unix.Fstatfs(fd, &fs) == nil && fs.Type == unix.NFS_SUPER_MAGIC
}
