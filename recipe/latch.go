package recipe

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/batonlock/baton"
)

// Latch is a countdown latch shared by every process that opens its name
// on one Backend: TrySetCount arms it with a count, each CountDown takes
// one off, and Await returns once the count is zero.
//
// The count is one Value, changed only by CompareAndSwap: a member that
// dies after its CountDown returned has counted, one that dies before has
// not, and one that dies in the middle has either counted once or not at
// all, never partly. A CountDown that fails with an error other than the
// end of its context (a network error) may have counted; Count tells.
// Await waits for the Value's notifications, not by polling.
type Latch struct {
	name string
	v    baton.Value
}

// NewLatch opens the latch of name on b. A latch never armed has count 0.
func NewLatch(ctx context.Context, b baton.Backend, name string) (*Latch, error) {
	v, err := b.Value(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Latch{name: name, v: v}, nil
}

// Close closes the latch's handle; the count stays.
func (l *Latch) Close() error { return l.v.Close() }

// TrySetCount arms the latch with n > 0 if its count is zero (never armed,
// or counted down), and reports whether it did; a latch still counting
// keeps its count.
func (l *Latch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if n <= 0 {
		return false, fmt.Errorf("recipe: latch %q: count %d: %w", l.name, n, baton.ErrInvalidArgument)
	}
	return swapValue(ctx, l.v, func(data []byte) ([]byte, error) {
		if decodeCount(data) > 0 {
			return nil, nil
		}
		return encodeCount(n), nil
	})
}

// CountDown takes one off the count; at zero it does nothing.
func (l *Latch) CountDown(ctx context.Context) error {
	_, err := swapValue(ctx, l.v, func(data []byte) ([]byte, error) {
		if c := decodeCount(data); c != 0 {
			return encodeCount(c - 1), nil
		}
		return nil, nil
	})
	return err
}

// Count returns the count now.
func (l *Latch) Count(ctx context.Context) (int64, error) {
	data, _, err := l.v.Load(ctx)
	return decodeCount(data), err
}

// Await waits until the count is zero or ctx ends.
func (l *Latch) Await(ctx context.Context) error {
	return awaitValue(ctx, l.v, func(data []byte) bool { return decodeCount(data) <= 0 })
}

func encodeCount(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// decodeCount reads a count; anything else reads as zero.
func decodeCount(b []byte) int64 {
	if len(b) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Barrier holds every process that waits on it while it is set (a gate
// that one process closes and opens for the others). Its state is one
// Value; Wait waits for the Value's notifications, not by polling. A
// process that dies leaves the barrier as it was: whoever sets it is the
// one that must remove it.
type Barrier struct {
	name string
	v    baton.Value
}

// NewBarrier opens the barrier of name on b; one never set is removed.
func NewBarrier(ctx context.Context, b baton.Backend, name string) (*Barrier, error) {
	v, err := b.Value(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Barrier{name: name, v: v}, nil
}

// Close closes the barrier's handle; its state stays.
func (b *Barrier) Close() error { return b.v.Close() }

// Set sets the barrier: Wait blocks from now on.
func (b *Barrier) Set(ctx context.Context) error { return b.store(ctx, true) }

// Remove removes the barrier: every Wait returns.
func (b *Barrier) Remove(ctx context.Context) error { return b.store(ctx, false) }

func (b *Barrier) store(ctx context.Context, set bool) error {
	_, err := swapValue(ctx, b.v, func(data []byte) ([]byte, error) {
		if isSet(data) == set {
			return nil, nil
		}
		return barrierState(set), nil
	})
	return err
}

// Wait waits until the barrier is removed or ctx ends.
func (b *Barrier) Wait(ctx context.Context) error {
	return awaitValue(ctx, b.v, func(data []byte) bool { return !isSet(data) })
}

func barrierState(set bool) []byte {
	if set {
		return []byte{1}
	}
	return []byte{0}
}

func isSet(b []byte) bool { return len(b) == 1 && b[0] == 1 }
