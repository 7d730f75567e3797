//go:build !linux

package ipc

import "context"

// WaitExit returns an error matching errors.ErrUnsupported on this system.
func WaitExit(ctx context.Context, pid int, tag uint32) error { return errNoProc }
