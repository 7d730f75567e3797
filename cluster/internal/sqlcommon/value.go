package sqlcommon

import (
	"context"
	"errors"

	"github.com/batonlock/baton/cluster/lease"
)

// ValueRow turns the read of a Value's row into what Load returns: no row
// (err matching noRows, the driver's) is version 0 with no data, and the
// data of a row is never nil, so that a stored empty value reads as one.
func ValueRow(ctx context.Context, data []byte, ver uint64, err, noRows error) ([]byte, uint64, error) {
	if errors.Is(err, noRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, lease.CtxErr(ctx, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, ver, nil
}

// WaitValue is a Value's Wait: it loads until the version is other than
// ver, or ctx ends. changed returns the channel that the next change
// closes or sends on; it is taken before each load, so that a change made
// after the load wakes the wait.
func WaitValue(ctx context.Context, ver uint64, changed func() <-chan struct{}, load func(context.Context) ([]byte, uint64, error)) ([]byte, uint64, error) {
	for {
		ch := changed()
		data, now, err := load(ctx)
		if err != nil || now != ver {
			return data, now, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-ch:
		}
	}
}
