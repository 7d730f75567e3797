//go:build !linux

package ipc

import (
	"errors"
	"fmt"
	"time"
)

// FutexWait returns an error matching errors.ErrUnsupported on this system.
func FutexWait(addr *uint32, val uint32, timeout time.Duration) (timedOut bool, err error) {
	return false, fmt.Errorf("ipc: futex: %w", errors.ErrUnsupported)
}

// FutexWake returns an error matching errors.ErrUnsupported on this system.
func FutexWake(addr *uint32, n int) (int, error) {
	return 0, fmt.Errorf("ipc: futex: %w", errors.ErrUnsupported)
}
