package baton

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton/driver"
)

// valueHandle is the core of a Value handle: validation, ErrClosed, error
// wrapping and a Close that ends Waits and waits for calls in progress
// before it closes the driver.
type valueHandle struct {
	b    *coreBackend
	name string
	d    driver.Value

	// mu is held for reading by every call while it uses d and for
	// writing by Close, so that d.Close comes after every call.
	mu     sync.RWMutex
	closed atomic.Bool
	// stop is cancelled by Close: it ends the Waits in progress.
	stop   context.Context
	cancel context.CancelFunc
}

func (b *coreBackend) Value(ctx context.Context, name string) (Value, error) {
	v, err := b.openValue(ctx, name)
	if err != nil {
		return nil, b.fail("open", KindValue, name, err)
	}
	return v, nil
}

func (b *coreBackend) openValue(ctx context.Context, name string) (*valueHandle, error) {
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	vo, ok := b.d.(driver.ValueOpener)
	if !ok {
		return nil, fmt.Errorf("%w: the %s backend has no versioned values", ErrUnsupported, b.kind)
	}
	d, err := vo.OpenValue(ctx, name)
	if err != nil {
		return nil, err
	}
	v := &valueHandle{b: b, name: name, d: d}
	v.stop, v.cancel = context.WithCancel(context.Background())
	if err := b.register(v); err != nil {
		return nil, err
	}
	return v, nil
}

// fail wraps the cause of a failed op in the handle's *Error.
func (v *valueHandle) fail(op string, err error) error {
	return wrapErr(op, v.b.kind, KindValue, v.name, err)
}

func (v *valueHandle) Name() string { return v.name }

// enter starts a call: it returns with mu held for reading, or an error.
// A context already done fails every call alike, before the driver, so
// that no backend writes for a caller that has given up.
func (v *valueHandle) enter(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v.mu.RLock()
	if v.closed.Load() {
		v.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (v *valueHandle) Load(ctx context.Context) ([]byte, uint64, error) {
	if err := v.enter(ctx); err != nil {
		return nil, 0, v.fail("load", err)
	}
	defer v.mu.RUnlock()
	data, ver, err := v.d.Load(ctx)
	if err != nil {
		return nil, 0, v.fail("load", err)
	}
	return norm(data, ver), ver, nil
}

func (v *valueHandle) CompareAndSwap(ctx context.Context, old uint64, data []byte) (uint64, error) {
	if len(data) > MaxValueSize {
		return 0, v.fail("cas", fmt.Errorf("%w: %d bytes of data, more than %d", ErrInvalidArgument, len(data), MaxValueSize))
	}
	if err := v.enter(ctx); err != nil {
		return 0, v.fail("cas", err)
	}
	defer v.mu.RUnlock()
	ver, err := v.d.CompareAndSwap(ctx, old, data)
	return ver, v.fail("cas", err)
}

func (v *valueHandle) Wait(ctx context.Context, ver uint64) ([]byte, uint64, error) {
	if err := v.enter(ctx); err != nil {
		return nil, 0, v.fail("wait", err)
	}
	defer v.mu.RUnlock()
	// The driver's context ends with ctx or with Close, whichever comes
	// first; its cause tells which.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(v.stop, func() { cancel(ErrClosed) })
	defer stop()
	data, now, err := v.d.Wait(wctx, ver)
	if err != nil {
		if context.Cause(wctx) == ErrClosed {
			err = ErrClosed
		}
		return nil, 0, v.fail("wait", err)
	}
	return norm(data, now), now, nil
}

// norm gives written data a non-nil slice, and version 0 nil data.
func norm(data []byte, ver uint64) []byte {
	if ver == 0 {
		return nil
	}
	if data == nil {
		return []byte{}
	}
	return data
}

func (v *valueHandle) Close() error { return v.fail("close", v.close()) }

func (v *valueHandle) close() error {
	if !v.closed.CompareAndSwap(false, true) {
		return nil
	}
	v.cancel()
	v.mu.Lock()
	err := v.d.Close()
	v.mu.Unlock()
	v.b.forget(v)
	return err
}

var _ Value = (*valueHandle)(nil)
