//go:build !linux

package condvar

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// Cond is a condition variable; on this system it cannot be opened.
type Cond struct{}

var errNo = fmt.Errorf("condvar: %w", errors.ErrUnsupported)

// Open validates name and returns an error matching errors.ErrUnsupported
// on this system.
func Open(ns *ipc.Namespace, name string) (*Cond, error) {
	return ipc.Open(ns, Kind, name, OpenEntry)
}

// OpenEntry returns an error matching errors.ErrUnsupported on this system.
func OpenEntry(e ipc.Entry) (*Cond, error) { return nil, errNo }

func (c *Cond) Prepare(ctx context.Context) (any, error)   { return nil, errNo }
func (c *Cond) Wait(ctx context.Context, ticket any) error { return errNo }
func (c *Cond) Cancel(ticket any)                          {}
func (c *Cond) Signal(ctx context.Context) error           { return errNo }
func (c *Cond) Broadcast(ctx context.Context) error        { return errNo }
func (c *Cond) Close() error                               { return nil }

// Inspect returns an error matching errors.ErrUnsupported on this system.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) { return baton.Info{}, errNo }

// List returns an error matching errors.ErrUnsupported on this system.
func List(ns *ipc.Namespace) ([]baton.Info, error) { return nil, errNo }

// Remove returns an error matching errors.ErrUnsupported on this system.
func Remove(ns *ipc.Namespace, name string) error { return errNo }
