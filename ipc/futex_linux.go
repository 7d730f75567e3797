//go:build linux

package ipc

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations. The shared (not _PRIVATE) variants are used because the
// words live in file mappings shared between processes: the kernel keys them
// by file and offset, not by address space.
const (
	futexWait = 0
	futexWake = 1
)

// FutexWait sleeps while *addr == val, at most timeout (timeout < 0: no
// limit). addr must be 4-byte aligned in a mapping shared between processes
// (a Region, or a file mapped MAP_SHARED as package filelock maps its lock
// files). It returns timedOut true when the timeout passed, and nil error
// also when *addr was not val (EAGAIN), when woken, and when interrupted by
// a signal (EINTR): the caller re-reads the word in every case.
func FutexWait(addr *uint32, val uint32, timeout time.Duration) (timedOut bool, err error) {
	var ts *unix.Timespec
	var t unix.Timespec
	if timeout >= 0 {
		t = unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
	switch e {
	case 0, unix.EAGAIN, unix.EINTR:
		return false, nil
	case unix.ETIMEDOUT:
		return true, nil
	default:
		return false, fmt.Errorf("ipc: futex wait: %w", e)
	}
}

// FutexWake wakes at most n processes or threads sleeping in FutexWait on
// addr and returns how many it woke.
func FutexWake(addr *uint32, n int) (int, error) {
	r, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(n), 0, 0, 0)
	if e != 0 {
		return 0, fmt.Errorf("ipc: futex wake: %w", e)
	}
	return int(r), nil
}
