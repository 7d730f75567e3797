//go:build !linux

package ipc

import (
	"context"
	"errors"
)

// ExitWatch calls a function once a process has exited; unsupported here.
type ExitWatch struct{}

// NotifyExit returns an error matching errors.ErrUnsupported on this system.
func NotifyExit(pid int, tag, mask uint32, fn func()) (w *ExitWatch, dead bool, err error) {
	return nil, false, errors.ErrUnsupported
}

// Stop is a no-op.
func (w *ExitWatch) Stop() {}

// WaitExit returns an error matching errors.ErrUnsupported on this system.
func WaitExit(ctx context.Context, pid int, tag uint32) error { return errNoProc }
