// Package sleep holds the one wait of the module's retry loops that ends
// early with its context.
package sleep

import (
	"context"
	"time"
)

// For waits d, or until ctx is done, and then returns ctx.Err() (nil when
// the whole of d passed first).
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
