package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/driver"
)

// Versioned values (baton.Value). A name's value is one hash, data and
// version, with no expiry; CompareAndSwap is one script (value_cas.lua)
// that also publishes the new version on the name's channel, and Wait
// listens there (values.go), re-reading every renewal period in case a
// message was lost with a broken Pub/Sub connection.

const kvalue = "value"

var scriptValueCAS = loadScript("value_cas")

// valueDriver serves one Value handle.
type valueDriver struct {
	d       *backend
	key     string // the hash
	channel string // where writes are announced
}

var _ driver.ValueOpener = (*backend)(nil)

// OpenValue opens a versioned value (driver.ValueOpener).
func (d *backend) OpenValue(ctx context.Context, name string) (driver.Value, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	base := redisnode.KeyBase(d.o.Prefix, kvalue, name)
	return &valueDriver{d: d, key: base + "hash", channel: base + "wake"}, nil
}

func (v *valueDriver) Load(ctx context.Context) ([]byte, uint64, error) {
	r, err := v.d.c.HMGet(ctx, v.key, "v", "d").Result()
	if err != nil {
		return nil, 0, ctxErr(ctx, err)
	}
	vs, _ := r[0].(string)
	if vs == "" {
		return nil, 0, nil
	}
	ver, err := strconv.ParseUint(vs, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("bad version %q in %s", vs, v.key)
	}
	ds, _ := r[1].(string)
	return []byte(ds), ver, nil
}

func (v *valueDriver) CompareAndSwap(ctx context.Context, old uint64, data []byte) (uint64, error) {
	r, err := scriptValueCAS.Run(ctx, v.d.c, []string{v.key}, old, data, v.channel).Slice()
	if err != nil {
		return 0, ctxErr(ctx, err)
	}
	if len(r) != 2 {
		return 0, fmt.Errorf("value_cas replied %v", r)
	}
	ok, _ := r[0].(int64)
	s, _ := r[1].(string)
	ver, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("value_cas replied version %v", r[1])
	}
	if ok != 1 {
		return ver, baton.ErrConflict
	}
	return ver, nil
}

func (v *valueDriver) Wait(ctx context.Context, ver uint64) ([]byte, uint64, error) {
	vs, err := v.d.valueSubs()
	if err != nil {
		return nil, 0, err
	}
	wake, leave, err := vs.join(ctx, v.channel)
	if err != nil {
		return nil, 0, err
	}
	defer leave()
	for {
		// Subscribed before this read: a write after it is announced to us.
		data, now, err := v.Load(ctx)
		if err != nil || now != ver {
			return data, now, err
		}
		t := time.NewTimer(v.d.o.RenewEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}

func (v *valueDriver) Close() error { return nil }

// valueSubs returns the Backend's value subscriptions, made on first use.
func (d *backend) valueSubs() (*valueSubs, error) {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("redislock: %w", baton.ErrClosed)
	}
	if d.vals == nil {
		d.vals = newValueSubs(d.c)
	}
	return d.vals, nil
}

// closeValues ends the value subscriptions, if any; Close calls it.
func (d *backend) closeValues() error {
	d.closeMu.Lock()
	vs := d.vals
	d.closeMu.Unlock()
	if vs == nil {
		return nil
	}
	return vs.close()
}
