package sleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestForWaits(t *testing.T) {
	start := time.Now()
	if err := For(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if since := time.Since(start); since < 20*time.Millisecond {
		t.Fatalf("returned after %v, before the 20ms", since)
	}
}

func TestForEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := For(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
	if since := time.Since(start); since > 10*time.Second {
		t.Fatalf("returned after %v", since)
	}
}
