package pglock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// TestOpenURLRefuses: bad URLs and options are refused with
// ErrInvalidArgument before any connection (the port is closed).
func TestOpenURLRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		url  string
		opts []lease.Option
	}{
		{"mysql://h/db", nil},
		{"postgres//h/db", nil},
		{"postgres://127.0.0.1:1/db?ttl=0s", nil},
		{"postgres://127.0.0.1:1/db?ttl=500ms", nil},
		{"postgres://127.0.0.1:1/db?ttl=soon", nil},
		{"postgres://127.0.0.1:1/db?prefix=Bad-Prefix", nil},
		{"postgres://127.0.0.1:1/db", []lease.Option{lease.WithPrefix("1abc")}},
		{"postgres://127.0.0.1:1/db", []lease.Option{lease.WithTTL(time.Second), lease.WithRenewEvery(time.Second)}},
		{"postgres://127.0.0.1:1/db", []lease.Option{nil}},
	} {
		b, err := OpenURL(ctx, tc.url, tc.opts...)
		if !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("OpenURL(%q): %v, want ErrInvalidArgument", tc.url, err)
		}
		if b != nil {
			b.Close()
		}
	}
	if _, err := New(nil); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
}

// TestPrefix: backends with different prefixes share nothing, and the
// URL's prefix parameter is the option's.
func TestPrefix(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	a := mutexT(t, openT(t, url), "prefixed")
	b := mutexT(t, openT(t, url+"&prefix=other_"), "prefixed")
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx); err != nil {
		t.Fatalf("a backend with another prefix: %v", err)
	}
	c := mutexT(t, openT(t, url, lease.WithPrefix("other_")), "prefixed")
	if _, err := c.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("same prefix by option and by URL: %v, want ErrLocked", err)
	}
	for _, m := range []baton.Mutex{a, b} {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
