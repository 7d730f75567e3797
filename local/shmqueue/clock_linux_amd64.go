package shmqueue

import (
	"syscall"
	"time"
)

// wallNow returns the wall clock in unix nanoseconds, to the microsecond:
// the times of a ready job and of a claim are for people to read, and
// this clock (the vDSO's gettimeofday) costs a fraction of time.Now's two
// readings.
func wallNow() int64 {
	var tv syscall.Timeval
	if syscall.Gettimeofday(&tv) != nil {
		return time.Now().UnixNano()
	}
	return tv.Nano()
}
