//go:build !linux

package filelock

import (
	"context"
	"fmt"
	"os"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// Mutex is unsupported on this system.
type Mutex struct{ unsupportedLock }

// RWMutex is unsupported on this system.
type RWMutex struct{ unsupportedLock }

func unsupported(path string) error {
	return fmt.Errorf("filelock: %w", &os.PathError{Op: "flock", Path: path, Err: baton.ErrUnsupported})
}

// OpenMutex returns an error matching errors.ErrUnsupported on this system.
func OpenMutex(path string) (*Mutex, error) { return nil, unsupported(path) }

// OpenMutexIn returns an error matching errors.ErrUnsupported on this system.
func OpenMutexIn(ns *ipc.Namespace, path string) (*Mutex, error) { return nil, unsupported(path) }

// OpenRWMutex returns an error matching errors.ErrUnsupported on this system.
func OpenRWMutex(dataPath, gatePath string) (*RWMutex, error) { return nil, unsupported(dataPath) }

// unsupportedLock gives both types the methods of driver.Lock.
type unsupportedLock struct{}

func (unsupportedLock) Acquire(context.Context, driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (unsupportedLock) TryAcquire(context.Context, driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (unsupportedLock) Release(context.Context, driver.Grant) error { return unsupported("") }
func (unsupportedLock) Downgrade(context.Context, driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (unsupportedLock) Close() error { return nil }

var (
	_ driver.Lock = (*Mutex)(nil)
	_ driver.Lock = (*RWMutex)(nil)
)
