// Package nolock holds the driver.Lock of the futex-based locks (mutex and
// shmrw) on systems without futexes, where they cannot be opened: each
// stub embeds Lock and keeps only its own Open.
package nolock

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonlock/baton/driver"
)

// Err is what every method of Lock returns.
var Err = fmt.Errorf("futex lock: %w", errors.ErrUnsupported)

// Lock is a driver.Lock that no one can hold.
type Lock struct{}

var _ driver.Lock = (*Lock)(nil)

func (*Lock) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, Err
}

func (*Lock) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return driver.Grant{}, Err
}

func (*Lock) Release(ctx context.Context, g driver.Grant) error { return Err }

func (*Lock) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, Err
}

func (*Lock) Close() error { return nil }
