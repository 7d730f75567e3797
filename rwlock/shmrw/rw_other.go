//go:build !linux

package shmrw

import (
	"errors"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/nolock"
	"github.com/batonlock/baton/ipc"
)

const kind = "shmrw"

// RW is the shared-memory read-write lock; on this system it cannot be
// opened.
type RW struct{ nolock.Lock }

var _ driver.Lock = (*RW)(nil)

var errNoFutex = fmt.Errorf("shmrw: %w", errors.ErrUnsupported)

// Open validates name and returns an error matching errors.ErrUnsupported.
func Open(ns *ipc.Namespace, name string) (*RW, error) {
	return ipc.Open(ns, kind, name, func(ipc.Entry) (*RW, error) { return nil, errNoFutex })
}

// Inspect returns an error matching errors.ErrUnsupported.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) { return baton.Info{}, errNoFutex }

// List returns an error matching errors.ErrUnsupported.
func List(ns *ipc.Namespace) ([]baton.Info, error) { return nil, errNoFutex }

// Remove returns an error matching errors.ErrUnsupported.
func Remove(ns *ipc.Namespace, name string) error { return errNoFutex }
