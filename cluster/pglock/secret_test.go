package pglock

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/testcert"
)

// The shared URL parameters are taken by the backend, never passed to the
// server as run-time parameters; ca= asks for verified TLS with no
// plain-text fallback; bad ones are refused before any connection.
func TestOpenURLSharedParams(t *testing.T) {
	base := strings.TrimSuffix(need(t), "?sslmode=disable")
	ctx := context.Background()
	t.Setenv("PGLOCK_TEST_PW", "any") // the test server trusts loopback
	b, err := baton.Open(ctx, base+"?sslmode=disable&password_env=PGLOCK_TEST_PW")
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Mutex(ctx, "secret-url")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	f := testcert.Write(t)
	if b, err := baton.Open(ctx, base+"?ca="+f.CA); err == nil {
		b.Close()
		t.Error("ca= connected to a server without TLS")
	} else if errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("ca= refused as a bad URL: %v", err)
	}
	for _, u := range []string{
		base + "?password_env=PGLOCK_TEST_UNSET",
		base + "?sslmode=require&ca=" + f.CA,
		base + "?ca=/nonexistent.pem",
		strings.Replace(base, "postgres@", "postgres:inline@", 1) + "?password_env=PGLOCK_TEST_PW",
	} {
		b, err := baton.Open(ctx, u)
		if err == nil {
			b.Close()
		}
		if !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", u, err)
		}
	}
}
