package baton

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// A backend whose driver has no channels refuses Channel with
// ErrUnsupported; bad options are refused before the driver is asked.
func TestChannelUnsupported(t *testing.T) {
	be := NewBackend(lateBackend{newLateDriver()})
	defer be.Close()
	ctx := context.Background()
	_, err := be.Channel(ctx, "c", ChannelOptions{})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Channel on a backend without channels: %v, want ErrUnsupported", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindChannel || e.Op != "open" || e.Name != "c" {
		t.Errorf("the error does not name the channel and the op: %#v", err)
	}
	if _, err := be.Channel(ctx, "c", ChannelOptions{Capacity: -1}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Channel with capacity -1: %v, want ErrInvalidArgument", err)
	}
}

// oneMsgChannel is a driver channel that always has one message of 64
// bytes to give.
type oneMsgChannel struct{ msg [64]byte }

func (d *oneMsgChannel) Options() (int, int, bool) { return 1024, 64, false }
func (d *oneMsgChannel) Send(context.Context, [][]byte, bool) (int, error) {
	return 0, ErrUnsupported
}
func (d *oneMsgChannel) SendFunc(context.Context, bool, func([]byte) (int, error)) error {
	return ErrUnsupported
}
func (d *oneMsgChannel) Recv(_ context.Context, _ int, _ bool, take func([]byte)) (int, error) {
	take(d.msg[:])
	return 1, nil
}
func (d *oneMsgChannel) CloseSend(context.Context) error { return nil }
func (d *oneMsgChannel) Interrupt()                      {}
func (d *oneMsgChannel) Close() error                    { return nil }

// A RecvBatch(64) that finds one message allocates for that one, not for
// 64 of the largest: a receiver that keeps up gets small batches.
func TestRecvBatchAllocatesWhatItGets(t *testing.T) {
	c := &chanHandle{b: &coreBackend{}, name: "c", d: &oneMsgChannel{}, opts: ChannelOptions{Capacity: 1024, MaxMessage: 64}}
	ctx := context.Background()
	var before, after runtime.MemStats
	const runs = 1000
	runtime.ReadMemStats(&before)
	for range runs {
		msgs, err := c.RecvBatch(ctx, 64)
		if err != nil || len(msgs) != 1 || len(msgs[0]) != 64 {
			t.Fatalf("RecvBatch: %d messages, %v", len(msgs), err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 512 {
		t.Errorf("a batch of one 64-byte message allocated %d bytes", per)
	}
}
