//go:build !linux

package ipc

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Mutex is the futex mutex; on this system it cannot be opened.
type Mutex struct{}

var _ driver.Lock = (*Mutex)(nil)

var errNoFutex = fmt.Errorf("ipc: futex mutex: %w", errors.ErrUnsupported)

// OpenMutex validates name and returns an error matching
// errors.ErrUnsupported on this system.
func OpenMutex(ns *Namespace, name string) (*Mutex, error) {
	if _, err := ns.Path(mutexKind, name); err != nil {
		return nil, err
	}
	return nil, errNoFutex
}

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

// InspectMutex returns an error matching errors.ErrUnsupported on this
// system.
func InspectMutex(ns *Namespace, name string) (baton.Info, error) {
	return baton.Info{}, errNoFutex
}
