//go:build !linux

package shmrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/recipe"
)

// Store is a rate limit in shared memory; on this system it cannot be
// opened.
type Store struct{}

var errNo = fmt.Errorf("shmrate: %w", errors.ErrUnsupported)

// OpenEntry returns an error matching errors.ErrUnsupported on this system.
func OpenEntry(e ipc.Entry) (*Store, error) { return nil, errNo }

func (s *Store) Step(ctx context.Context, op recipe.RateOp, lim recipe.Limit, n int64, at time.Time) (recipe.RateOutcome, error) {
	return recipe.RateOutcome{}, errNo
}
func (s *Store) Close() error { return nil }
