//go:build !linux

package mutex

import (
	"errors"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/nolock"
	"github.com/batonlock/baton/ipc"
)

// Mutex is the futex mutex; on this system it cannot be opened.
type Mutex struct{ nolock.Lock }

var _ driver.Lock = (*Mutex)(nil)

var errNoFutex = fmt.Errorf("futex mutex: %w", errors.ErrUnsupported)

// Open validates name and returns an error matching
// errors.ErrUnsupported on this system.
func Open(ns *ipc.Namespace, name string) (*Mutex, error) {
	return ipc.Open(ns, Kind, name, OpenEntry)
}

// OpenEntry returns an error matching errors.ErrUnsupported on this system.
func OpenEntry(e ipc.Entry) (*Mutex, error) { return nil, errNoFutex }

// Inspect returns an error matching errors.ErrUnsupported on this
// system.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	return baton.Info{}, errNoFutex
}
