//go:build !linux

package shmvalue

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonlock/baton/ipc"
)

// Value is a versioned value; on this system it cannot be opened.
type Value struct{}

var errNo = fmt.Errorf("shmvalue: %w", errors.ErrUnsupported)

// OpenEntry returns an error matching errors.ErrUnsupported on this system.
func OpenEntry(e ipc.Entry) (*Value, error) { return nil, errNo }

func (v *Value) Load(ctx context.Context) ([]byte, uint64, error) { return nil, 0, errNo }
func (v *Value) CompareAndSwap(ctx context.Context, old uint64, data []byte) (uint64, error) {
	return 0, errNo
}
func (v *Value) Wait(ctx context.Context, ver uint64) ([]byte, uint64, error) { return nil, 0, errNo }
func (v *Value) Close() error                                                 { return nil }
