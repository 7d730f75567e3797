//go:build !linux

package shmqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// Queue is a work queue; on this system it cannot be opened.
type Queue struct{}

var errNo = fmt.Errorf("shmqueue: %w", errors.ErrUnsupported)

// OpenEntry returns an error matching errors.ErrUnsupported on this system.
func OpenEntry(e ipc.Entry) (*Queue, error) { return nil, errNo }

func (q *Queue) MaxPayload() int { return MaxPayload }
func (q *Queue) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	return nil, errNo
}
func (q *Queue) Claim(ctx context.Context, n int, wait bool) ([]driver.Claim, error) {
	return nil, errNo
}
func (q *Queue) Ack(ctx context.Context, c driver.Claim) error { return errNo }
func (q *Queue) Retry(ctx context.Context, c driver.Claim, at time.Time, reason string) error {
	return errNo
}
func (q *Queue) Stats(ctx context.Context) (driver.QueueStats, error) {
	return driver.QueueStats{}, errNo
}
func (q *Queue) Dead(ctx context.Context, limit int) ([]driver.DeadJob, error) { return nil, errNo }
func (q *Queue) Requeue(ctx context.Context, ids []uint64) (int, error)        { return 0, errNo }
func (q *Queue) Purge(ctx context.Context, ids []uint64) (int, error)          { return 0, errNo }
func (q *Queue) Close() error                                                  { return nil }

// Inspect returns an error matching errors.ErrUnsupported on this system.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) { return baton.Info{}, errNo }

// List returns an error matching errors.ErrUnsupported on this system.
func List(ns *ipc.Namespace) ([]baton.Info, error) { return nil, errNo }

// Remove returns an error matching errors.ErrUnsupported on this system.
func Remove(ns *ipc.Namespace, name string) error { return errNo }
