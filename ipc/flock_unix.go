//go:build unix

package ipc

import (
	"context"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Flock is flock(2) on fd, made again when a signal interrupts it (a
// flock that fails with EINTR has changed nothing). how is LOCK_SH,
// LOCK_EX or LOCK_UN, with LOCK_NB or without; a lock taken elsewhere
// under LOCK_NB is unix.EWOULDBLOCK, returned as it is.
func Flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

// FlockWait takes a flock(2) in mode how (LOCK_SH or LOCK_EX) on a new
// open file description of path, opened with flags, and returns that file
// holding the lock. It waits in the kernel, not by polling. A blocking
// flock cannot be interrupted from another goroutine (Go restarts the
// call after its signals), so when ctx ends first FlockWait returns ctx's
// error at once and leaves the call to finish in a goroutine of its own,
// which gives the lock back and closes the file as soon as it gets it;
// that goroutine lives as long as the holder holds.
func FlockWait(ctx context.Context, path string, flags int, how int) (*os.File, error) {
	f, err := os.OpenFile(path, flags|os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if ctx.Done() == nil {
		if err := Flock(int(f.Fd()), how); err != nil {
			f.Close()
			return nil, &fs.PathError{Op: "flock", Path: path, Err: err}
		}
		return f, nil
	}
	// Unbuffered: the goroutine hands its outcome over only to a caller
	// still waiting, else it undoes it itself.
	done := make(chan error)
	abandoned := make(chan struct{})
	go func() {
		err := Flock(int(f.Fd()), how)
		select {
		case done <- err:
		case <-abandoned:
			if err == nil {
				_ = Flock(int(f.Fd()), unix.LOCK_UN)
			}
			f.Close()
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, &fs.PathError{Op: "flock", Path: path, Err: err}
		}
		return f, nil
	case <-ctx.Done():
		close(abandoned)
		// The call may have finished as ctx ended: take its outcome if so.
		select {
		case err := <-done:
			if err == nil {
				_ = Flock(int(f.Fd()), unix.LOCK_UN)
			}
			f.Close()
		default:
		}
		return nil, ctx.Err()
	}
}
