//go:build !linux

package filelock

import (
	"context"
	"fmt"
	"os"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Mutex is unsupported on this system.
type Mutex struct{}

// RWMutex is unsupported on this system.
type RWMutex struct{}

func unsupported(path string) error {
	return fmt.Errorf("filelock: %w", &os.PathError{Op: "flock", Path: path, Err: baton.ErrUnsupported})
}

// OpenMutex returns an error matching errors.ErrUnsupported on this system.
func OpenMutex(path string) (*Mutex, error) { return nil, unsupported(path) }

// OpenRWMutex returns an error matching errors.ErrUnsupported on this system.
func OpenRWMutex(dataPath, gatePath string) (*RWMutex, error) { return nil, unsupported(dataPath) }

func (*Mutex) Acquire(context.Context, driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (*Mutex) TryAcquire(context.Context, driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (*Mutex) Release(context.Context, driver.Grant) error { return unsupported("") }
func (*Mutex) Downgrade(context.Context, driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (*Mutex) Close() error { return nil }

func (*RWMutex) Acquire(context.Context, driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (*RWMutex) TryAcquire(context.Context, driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (*RWMutex) Release(context.Context, driver.Grant) error { return unsupported("") }
func (*RWMutex) Downgrade(context.Context, driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, unsupported("")
}
func (*RWMutex) Close() error { return nil }
