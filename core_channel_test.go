package baton

import (
	"context"
	"errors"
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
