//go:build !linux

package shmsem

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

const kind = "shmsem"

// MaxPermits is the largest capacity.
const MaxPermits = math.MaxInt32

// Sem is the shared-memory semaphore; on this system it cannot be opened.
type Sem struct{}

var _ driver.Semaphore = (*Sem)(nil)

var errNoFutex = fmt.Errorf("shmsem: %w", errors.ErrUnsupported)

// Open validates its arguments and returns an error matching
// errors.ErrUnsupported.
func Open(ns *ipc.Namespace, name string, permits int64) (*Sem, error) {
	if _, err := ns.Path(kind, name); err != nil {
		return nil, err
	}
	if err := baton.ValidatePermits(permits, 0); err != nil {
		return nil, err
	}
	return nil, errNoFutex
}

func (s *Sem) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	return driver.Grant{}, errNoFutex
}
func (s *Sem) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	return driver.Grant{}, errNoFutex
}
func (s *Sem) Release(ctx context.Context, g driver.Grant, n int64) error { return errNoFutex }
func (s *Sem) Capacity() int64                                            { return 0 }
func (s *Sem) Close() error                                               { return nil }

// Inspect returns an error matching errors.ErrUnsupported.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) { return baton.Info{}, errNoFutex }

// List returns an error matching errors.ErrUnsupported.
func List(ns *ipc.Namespace) ([]baton.Info, error) { return nil, errNoFutex }

// Remove returns an error matching errors.ErrUnsupported.
func Remove(ns *ipc.Namespace, name string) error { return errNoFutex }
