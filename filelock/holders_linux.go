//go:build linux

package filelock

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/ipc"
)

// readHolders sends on out the pids of the other processes that hold a
// flock of the file open as fd, read from /proc/locks (which lists every
// flock with the pid of the process that took it and the inode of its
// file), then rings w. It runs beside the waiter w: a read of /proc/locks
// may first wait for the kernel's grace period, milliseconds during which
// the waiter sleeps and a release or the holder's close still wake it.
func readHolders(fd int, out chan<- []int, w *ipc.Waiter) {
	var pids []int
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		hs, _ := flockHolders(uint64(st.Dev), st.Ino)
		self := os.Getpid()
		for _, h := range hs {
			if h.PID != self && !slices.Contains(pids, h.PID) {
				pids = append(pids, h.PID)
			}
		}
	}
	out <- pids
	w.Ring()
}

// watchHolders makes w's sleeps end when one of the processes pids exits
// (the kernel drops its lock then, and nobody bumps the release
// generation), and reports whether one has exited already (its lock is
// released then).
func watchHolders(pids []int, w *ipc.Waiter) (dead bool) {
	for _, pid := range pids {
		if w.WatchExit(pid) {
			return true
		}
	}
	return false
}

// forEachHolder calls fn with the pid and mode of every flock held (not
// waited for) on the file dev/ino in the text of /proc/locks, whose lines
// read "1: FLOCK  ADVISORY  WRITE 4242 00:1a:1234 0 EOF" (device major
// and minor in hex), a waiter's with "->" after the number.
func forEachHolder(locks []byte, dev, ino uint64, fn func(pid int, write bool)) {
	want := []byte(fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino))
	for len(locks) > 0 {
		line := locks
		if i := bytes.IndexByte(locks, '\n'); i >= 0 {
			line, locks = locks[:i], locks[i+1:]
		} else {
			locks = nil
		}
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[1]) != "FLOCK" || !bytes.Equal(f[5], want) {
			continue
		}
		if pid, err := strconv.Atoi(string(f[4])); err == nil && pid > 0 {
			fn(pid, string(f[3]) == "WRITE")
		}
	}
}

// onNFS reports whether fd is a file on NFS, whose locks other machines
// may hold: their release wakes nobody here.
func onNFS(fd int) bool {
	var fs unix.Statfs_t
	return unix.Fstatfs(fd, &fs) == nil && fs.Type == unix.NFS_SUPER_MAGIC
}
