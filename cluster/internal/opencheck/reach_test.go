package opencheck

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// freeAddr returns a loopback address that nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestUnreachableAtOpen: every network backend reaches its server in
// Open, so an address with no server fails there (not at the first Lock),
// with an error that names the address and is not ErrInvalidArgument (the
// URL was fine), within the backend's own bound, not the caller's
// context's.
func TestUnreachableAtOpen(t *testing.T) {
	addr := freeAddr(t)
	q := "request_timeout=2s"
	for _, raw := range urls(addr, q) {
		if strings.HasPrefix(raw, "redlock://") {
			raw = "redlock://" + addr + "," + freeAddr(t) + "," + freeAddr(t) + "?" + q
		}
		if strings.HasPrefix(raw, "rediss://") {
			continue // the same client as redis://, with TLS
		}
		t.Run(strings.SplitN(raw, ":", 2)[0], func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			b, err := baton.Open(ctx, raw)
			if b != nil {
				b.Close()
			}
			took := time.Since(start)
			if err == nil || errors.Is(err, baton.ErrInvalidArgument) || !strings.Contains(err.Error(), addr) {
				t.Fatalf("Open(%q) = %v, want an error naming %s", raw, err, addr)
			}
			if ctx.Err() != nil {
				t.Fatalf("Open(%q) waited for the caller's context (%v): %v", raw, took, err)
			}
			t.Logf("%v: %v", took.Round(time.Millisecond), err)
		})
	}
}
