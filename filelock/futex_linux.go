//go:build linux

package filelock

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	futexWait = 0 // FUTEX_WAIT, shared (not FUTEX_PRIVATE_FLAG): other processes map the word too
	futexWake = 1
)

// futexSleep waits until *addr != val, a wake, or d has passed.
func futexSleep(addr *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWakeAll wakes every process and thread sleeping on addr.
func futexWakeAll(addr *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}
