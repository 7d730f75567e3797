package baton

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/driver"
)

// kindRate names a rate limit's store in errors; the limit itself is
// package recipe's, so it is no Kind of the listings.
const kindRate Kind = "rate"

// rateHandle is the core of a backend's own rate store (driver.RateOpener):
// ErrClosed, error wrapping, and a Close that waits for the steps in
// progress before it closes the driver.
type rateHandle struct {
	b      *coreBackend
	name   string
	d      driver.Rate
	mu     sync.RWMutex // held for reading by each step, for writing by Close
	closed atomic.Bool
}

// OpenRate opens the driver's own store of the rate limit name
// (driver.RateOpener), for package recipe.
func (b *coreBackend) OpenRate(ctx context.Context, name string) (driver.Rate, error) {
	ro, ok := b.d.(driver.RateOpener)
	if !ok { // asked by every rate limit of a backend without: no failure to observe
		return nil, wrapErr("open", b.kind, kindRate, name, fmt.Errorf("%w: the %s backend keeps no rate limit of its own", ErrUnsupported, b.kind))
	}
	if err := b.validate(ctx, name); err != nil {
		return nil, b.fail("open", kindRate, name, err)
	}
	d, err := ro.OpenRate(ctx, name)
	if err != nil {
		return nil, b.fail("open", kindRate, name, err)
	}
	r := &rateHandle{b: b, name: name, d: d}
	if err := b.register(r); err != nil {
		return nil, b.fail("open", kindRate, name, err)
	}
	return r, nil
}

func (r *rateHandle) fail(op string, err error) error {
	return wrapErr(op, r.b.kind, kindRate, r.name, err)
}

func (r *rateHandle) Step(ctx context.Context, op driver.RateOp, lim driver.RateLimit, n int64, at time.Time) (driver.RateOutcome, error) {
	if ctx == nil {
		return driver.RateOutcome{}, r.fail("step", errNilContext)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed.Load() {
		return driver.RateOutcome{}, r.fail("step", ErrClosed)
	}
	o, err := r.d.Step(ctx, op, lim, n, at)
	if err != nil {
		return o, r.fail("step", err)
	}
	return o, nil
}

func (r *rateHandle) Close() error { return r.fail("close", r.close()) }

func (r *rateHandle) close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	r.mu.Lock()
	err := r.d.Close()
	r.mu.Unlock()
	r.b.forget(r)
	return err
}

var _ driver.RateOpener = (*coreBackend)(nil)
