package recipe

import (
	"context"
	"errors"

	"github.com/batonlock/baton"
)

// swapValue writes next(data) over v's data by CompareAndSwap, reading
// again and calling next again on each conflict, until a write succeeds or
// next declines (returns nil data, or an error). It reports whether it
// wrote.
func swapValue(ctx context.Context, v baton.Value, next func(data []byte) ([]byte, error)) (bool, error) {
	data, ver, err := v.Load(ctx)
	for err == nil {
		var out []byte
		if out, err = next(data); err != nil || out == nil {
			return false, err
		}
		if _, err = v.CompareAndSwap(ctx, ver, out); err == nil {
			return true, nil
		}
		if errors.Is(err, baton.ErrConflict) {
			data, ver, err = v.Load(ctx)
		}
	}
	return false, err
}

// awaitValue waits until done is true of v's data, or ctx ends.
func awaitValue(ctx context.Context, v baton.Value, done func(data []byte) bool) error {
	data, ver, err := v.Load(ctx)
	for err == nil && !done(data) {
		data, ver, err = v.Wait(ctx, ver)
	}
	return err
}

// guarded is a name's Mutex and the Value recorded under it: the state of
// the recipes that publish what a hold decided (Election, IntervalLock).
type guarded struct {
	name string
	m    baton.Mutex
	v    baton.Value
}

// openGuarded opens the Mutex and the Value of name on b.
func openGuarded(ctx context.Context, b baton.Backend, name string) (guarded, error) {
	m, err := b.Mutex(ctx, name)
	if err != nil {
		return guarded{}, err
	}
	v, err := b.Value(ctx, name)
	if err != nil {
		return guarded{}, errors.Join(err, m.Close())
	}
	return guarded{name: name, m: m, v: v}, nil
}

func (g *guarded) close() error { return errors.Join(g.v.Close(), g.m.Close()) }
