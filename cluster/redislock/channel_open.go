package redislock

import (
	"context"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/driver"
)

// OpenChannel opens a channel (driver.ChannelOpener).
func (d *backend) OpenChannel(ctx context.Context, name string, capacity, maxMessage int, oneToOne bool) (driver.Channel, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	k := newChanKeys(d.o.Prefix, name)
	one := 0
	if oneToOne {
		one = 1
	}
	r, err := scriptChanOpen.Run(ctx, d.c, k.keys, capacity, maxMessage, baton.DefaultChannelCapacity, baton.DefaultMaxMessage, one).Int64Slice()
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	if len(r) != 3 {
		return nil, fmt.Errorf("chan_open replied %v", r)
	}
	if err := chanMismatch(int(r[0]), int(r[1]), capacity, maxMessage); err != nil {
		return nil, err
	}
	if oneToOne && r[2] == 0 {
		return nil, errNotOneToOne
	}
	rc := newReceipts(redisnode.KeyBase(d.o.Prefix, kchan, name))
	return &chanDriver{d: d, k: k, rk: append(k.keys[:2:2], rc.key), r: rc,
		capacity: int(r[0]), maxMsg: int(r[1]), one: r[2] != 0, stop: make(chan struct{})}, nil
}

// errNotOneToOne refuses a one-to-one opener of a many-to-many channel.
var errNotOneToOne = fmt.Errorf("%w: the channel exists for many senders and receivers, not one-to-one", baton.ErrMismatch)

// chanMismatch names each asked parameter (non-zero) that differs from the
// channel's.
func chanMismatch(haveCap, haveMax, capacity, maxMessage int) error {
	var errs []error
	if capacity != 0 && capacity != haveCap {
		errs = append(errs, &baton.MismatchError{Param: "capacity", Have: int64(haveCap), Want: int64(capacity)})
	}
	if maxMessage != 0 && maxMessage != haveMax {
		errs = append(errs, &baton.MismatchError{Param: "largest message", Have: int64(haveMax), Want: int64(maxMessage)})
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], errs[1])
}
