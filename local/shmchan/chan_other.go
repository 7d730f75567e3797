//go:build !linux

package shmchan

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// Chan is a channel; on this system it cannot be opened.
type Chan struct{}

var errNo = fmt.Errorf("shmchan: %w", errors.ErrUnsupported)

// OpenEntry returns an error matching errors.ErrUnsupported on this system.
func OpenEntry(e ipc.Entry, capacity, maxMessage int, oneToOne bool) (*Chan, error) {
	return nil, errNo
}

func (c *Chan) Options() (int, int, bool) { return 0, 0, false }
func (c *Chan) Send(ctx context.Context, msgs [][]byte, block bool) (int, error) {
	return 0, errNo
}
func (c *Chan) SendFunc(ctx context.Context, block bool, fill func(buf []byte) (int, error)) error {
	return errNo
}
func (c *Chan) Recv(ctx context.Context, max int, block bool, take func(msg []byte)) (int, error) {
	return 0, errNo
}
func (c *Chan) CloseSend(ctx context.Context) error { return errNo }
func (c *Chan) Interrupt()                          {}
func (c *Chan) Close() error                        { return nil }

// Inspect returns an error matching errors.ErrUnsupported on this system.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) { return baton.Info{}, errNo }

// List returns an error matching errors.ErrUnsupported on this system.
func List(ns *ipc.Namespace) ([]baton.Info, error) { return nil, errNo }

// Remove returns an error matching errors.ErrUnsupported on this system.
func Remove(ns *ipc.Namespace, name string) error { return errNo }
