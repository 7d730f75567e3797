//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The raw peers: the least a program can do with the kernel objects baton
// builds on. They take no context and keep no state beyond a descriptor.

// rawFlock is flock(2) on its own open file description.
type rawFlock struct{ fd int }

func openRawFlock(path string) (*rawFlock, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &rawFlock{fd: fd}, nil
}

func (f *rawFlock) flock(how int) error {
	for {
		err := unix.Flock(f.fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

func (f *rawFlock) lock(context.Context) error    { return f.flock(unix.LOCK_EX) }
func (f *rawFlock) unlock(context.Context) error  { return f.flock(unix.LOCK_UN) }
func (f *rawFlock) rlock(context.Context) error   { return f.flock(unix.LOCK_SH) }
func (f *rawFlock) runlock(context.Context) error { return f.flock(unix.LOCK_UN) }
func (f *rawFlock) close() error                  { return unix.Close(f.fd) }

// System V constants not all exported by x/sys on every architecture.
const (
	semUndo   = 0x1000
	semSetVal = 16
)

type sembuf struct {
	num uint16
	op  int16
	flg int16
}

// rawSem is one System V semaphore set used with semop(2) directly.
// Semaphore 0 is the lock (or permit count); for the reader/writer form,
// semaphore 0 counts writers (0 or 1) and semaphore 1 counts readers.
type rawSem struct{ id int }

// ftok derives a System V key from a file, as ftok(3) does.
func ftok(path string, proj byte) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return int(uint32(st.Ino&0xffff) | uint32(st.Dev&0xff)<<16 | uint32(proj)<<24), nil
}

// openRawSem opens (creating and setting to init when new) a set of nsems
// semaphores keyed by a file under dir named after key.
func openRawSem(dir, key string, nsems int, init int) (*rawSem, error) {
	p := filepath.Join(dir, "rawsem-"+key)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	f.Close()
	k, err := ftok(p, 'b')
	if err != nil {
		return nil, err
	}
	id, _, e := unix.Syscall(unix.SYS_SEMGET, uintptr(k), uintptr(nsems), unix.IPC_CREAT|unix.IPC_EXCL|0o600)
	if e == 0 {
		if init != 0 {
			if _, _, e := unix.Syscall6(unix.SYS_SEMCTL, id, 0, semSetVal, uintptr(init), 0, 0); e != 0 {
				return nil, fmt.Errorf("semctl SETVAL: %w", e)
			}
		}
		return &rawSem{id: int(id)}, nil
	}
	if e != unix.EEXIST {
		return nil, fmt.Errorf("semget: %w", e)
	}
	id, _, e = unix.Syscall(unix.SYS_SEMGET, uintptr(k), uintptr(nsems), 0o600)
	if e != 0 {
		return nil, fmt.Errorf("semget: %w", e)
	}
	return &rawSem{id: int(id)}, nil
}

// removeRawSems removes the sets of every key file under dir, whichever
// process created them.
func removeRawSems(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "rawsem-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range files {
		k, err := ftok(p, 'b')
		if err != nil {
			errs = append(errs, err)
			continue
		}
		id, _, e := unix.Syscall(unix.SYS_SEMGET, uintptr(k), 0, 0)
		if e == unix.ENOENT {
			continue
		}
		if e != 0 {
			errs = append(errs, fmt.Errorf("semget %s: %w", p, e))
			continue
		}
		if _, _, e := unix.Syscall6(unix.SYS_SEMCTL, id, 0, unix.IPC_RMID, 0, 0, 0); e != 0 && e != unix.EINVAL {
			errs = append(errs, fmt.Errorf("semctl IPC_RMID %s: %w", p, e))
		}
	}
	return errors.Join(errs...)
}

func (s *rawSem) semop(ops ...sembuf) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_SEMOP, uintptr(s.id), uintptr(unsafe.Pointer(&ops[0])), uintptr(len(ops)))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		default:
			return fmt.Errorf("semop: %w", e)
		}
	}
}

func (s *rawSem) lock(context.Context) error   { return s.semop(sembuf{0, -1, semUndo}) }
func (s *rawSem) unlock(context.Context) error { return s.semop(sembuf{0, 1, semUndo}) }

// Reader/writer on two semaphores: a reader waits for no writer and counts
// itself in; a writer marks itself (so new readers wait: writer preference),
// then waits for the readers to drain.
func (s *rawSem) rlock(context.Context) error {
	return s.semop(sembuf{0, 0, 0}, sembuf{1, 1, semUndo})
}
func (s *rawSem) runlock(context.Context) error { return s.semop(sembuf{1, -1, semUndo}) }
func (s *rawSem) wlock(ctx context.Context) error {
	if err := s.semop(sembuf{0, 0, 0}, sembuf{0, 1, semUndo}); err != nil {
		return err
	}
	return s.semop(sembuf{1, 0, 0})
}
func (s *rawSem) wunlock(context.Context) error     { return s.semop(sembuf{0, -1, semUndo}) }
func (s *rawSem) acquire(ctx context.Context) error { return s.lock(ctx) }
func (s *rawSem) release(ctx context.Context) error { return s.unlock(ctx) }
func (s *rawSem) close() error                      { return nil }

// rawSemRW adapts rawSem to the reader/writer handle.
type rawSemRW struct{ *rawSem }

func (s rawSemRW) lock(ctx context.Context) error   { return s.wlock(ctx) }
func (s rawSemRW) unlock(ctx context.Context) error { return s.wunlock(ctx) }
