//go:build linux && !amd64

package shmqueue

import "time"

// wallNow returns the wall clock in unix nanoseconds. (syscall's
// gettimeofday is a system call here.)
func wallNow() int64 { return time.Now().UnixNano() }
