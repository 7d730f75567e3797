//go:build linux

package filelock

import (
	"context"
	"fmt"
	"os"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"golang.org/x/sys/unix"
)

// RWMutex is a writer-preferring reader/writer lock on flock(2) over a data
// file and a gate file; it implements driver.Lock with an atomic
// Downgrade. The zero value is not usable; use OpenRWMutex.
//
// Protocol: every acquirer first takes the gate exclusively. A reader then
// takes the data file shared and lets the gate go at once; a writer takes
// the data file exclusively and keeps the gate until it unlocks. A writer
// holding the gate thus keeps new readers out while the readers already in
// drain, and no one can reach the data file while a writer converts its
// lock to shared.
type RWMutex struct {
	handle         // the data file
	gate     int   // fd of the gate file
	gateMark *mark // the gate file's mark (see mark)
}

// OpenRWMutex opens (creating them with mode 0600 when missing) the data
// and gate files of a reader/writer lock.
func OpenRWMutex(dataPath, gatePath string) (*RWMutex, error) {
	data, err := openLockFile(dataPath)
	if err != nil {
		return nil, fmt.Errorf("filelock: %w", err)
	}
	gate, err := unix.Open(gatePath, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		_ = data.close()
		return nil, fmt.Errorf("filelock: %w", &os.PathError{Op: "open", Path: gatePath, Err: err})
	}
	gate = raiseFD(gate)
	var st unix.Stat_t
	if err := unix.Fstat(gate, &st); err != nil {
		_ = data.close()
		unix.Close(gate)
		return nil, fmt.Errorf("filelock: %w", &os.PathError{Op: "fstat", Path: gatePath, Err: err})
	}
	return &RWMutex{handle: handle{lf: data}, gate: gate, gateMark: newMark(gate, &st)}, nil
}

func (rw *RWMutex) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return rw.acquire(ctx, mode, true)
}

func (rw *RWMutex) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return rw.acquire(ctx, mode, false)
}

func (rw *RWMutex) acquire(ctx context.Context, mode driver.Mode, block bool) (driver.Grant, error) {
	d, err := rw.file()
	if err != nil {
		return driver.Grant{}, err
	}
	defer rw.waiter.Close()
	for {
		if err := flockWait(ctx, rw.gate, unix.LOCK_EX, d.pg, block, &rw.waiter, rw.gateMark); err != nil {
			return driver.Grant{}, err
		}
		how := unix.LOCK_EX
		if mode == driver.Shared {
			how = unix.LOCK_SH
		}
		if err := flockWait(ctx, d.fd, how, d.pg, block, &rw.waiter, d.mark); err != nil {
			_ = unlock(rw.gate)
			released(d.pg)
			return driver.Grant{}, err
		}
		if !d.current() {
			_ = unlock(d.fd)
			_ = unlock(rw.gate)
			released(d.pg)
			if err := d.reopen(); err != nil {
				return driver.Grant{}, err
			}
			continue
		}
		if mode == driver.Shared {
			_ = unlock(rw.gate)
			released(d.pg)
			return newGrant(d, driver.Shared, d.pg.token.Load()), nil
		}
		return newGrant(d, driver.Exclusive, d.exclusive()), nil
	}
}

func (rw *RWMutex) Release(ctx context.Context, g driver.Grant) error {
	return release(rw.lf, rw.gate, g)
}

// TryFirst tells the core that TryAcquire is a local syscall.
func (rw *RWMutex) TryFirst() bool { return true }

// Downgrade converts the exclusive hold to shared while keeping the gate, so
// that no writer can slip into the instant flock's conversion leaves open.
func (rw *RWMutex) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	gd, err := driver.DataOf[grantData](g)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("downgrade: %w", err)
	}
	if gd.mode != driver.Exclusive {
		return driver.Grant{}, fmt.Errorf("downgrade: %w", baton.ErrNotHeld)
	}
	if err := gd.loss.Err(); err != nil {
		return driver.Grant{}, err
	}
	d := rw.lf
	d.pg.pid.Store(0)
	// Blocking on purpose: nobody else can hold or wait for the data file
	// in the kernel while we keep the gate.
	if err := ipc.Flock(d.fd, unix.LOCK_SH); err != nil {
		return driver.Grant{}, fmt.Errorf("downgrade: %w", err)
	}
	if err := unlock(rw.gate); err != nil {
		return driver.Grant{}, fmt.Errorf("downgrade: unlock gate: %w", err)
	}
	released(d.pg)
	gd.mode = driver.Shared
	return driver.Grant{Token: g.Token, Loss: g.Loss, Data: gd}, nil
}

// Close closes both files; holds still held are released by the kernel.
func (rw *RWMutex) Close() error {
	return rw.close(func() error {
		rw.gateMark.w.Stop()
		return unix.Close(rw.gate)
	})
}

var (
	_ driver.Lock = (*Mutex)(nil)
	_ driver.Lock = (*RWMutex)(nil)
)
