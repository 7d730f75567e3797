//go:build !linux

package mutex

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// Mutex is the futex mutex; on this system it cannot be opened.
type Mutex struct{}

var _ driver.Lock = (*Mutex)(nil)

var errNoFutex = fmt.Errorf("futex mutex: %w", errors.ErrUnsupported)

// Open validates name and returns an error matching
// errors.ErrUnsupported on this system.
func Open(ns *ipc.Namespace, name string) (*Mutex, error) {
	if _, err := ns.Entry(Kind, name); err != nil {
		return nil, err
	}
	return nil, errNoFutex
}

// OpenEntry returns an error matching errors.ErrUnsupported on this system.
func OpenEntry(e ipc.Entry) (*Mutex, error) { return nil, errNoFutex }

func (m *Mutex) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, errNoFutex
}

func (m *Mutex) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, errNoFutex
}

func (m *Mutex) Release(ctx context.Context, g driver.Grant) error { return errNoFutex }

func (m *Mutex) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, errNoFutex
}

func (m *Mutex) Close() error { return nil }

// Inspect returns an error matching errors.ErrUnsupported on this
// system.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	return baton.Info{}, errNoFutex
}
