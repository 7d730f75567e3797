package baton

import (
	"context"
	"errors"
	"testing"

	"github.com/batonlock/baton/driver"
)

// A Backend whose driver keeps no rate limit answers ErrUnsupported, for
// package recipe to fall back to the Value.
func TestOpenRateUnsupported(t *testing.T) {
	b := NewBackend(&errBackend{})
	defer b.Close()
	ro, ok := b.(driver.RateOpener)
	if !ok {
		t.Fatal("the core's Backend has no OpenRate")
	}
	if _, err := ro.OpenRate(context.Background(), "x"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("OpenRate: %v", err)
	}
}
