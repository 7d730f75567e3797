package baton_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/batonlock/baton"
	_ "github.com/batonlock/baton/local" // registers local: and file:
)

func TestOpenLocal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, u := range []string{"local://" + dir, "LOCAL://" + dir, "file://" + dir} {
		b, err := baton.Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		m, err := b.Mutex(ctx, "open-local")
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
	}
	if s := baton.Schemes(); !slices.Contains(s, "local") || !slices.Contains(s, "file") {
		t.Errorf("Schemes() = %v, want local and file among them", s)
	}
}

func TestOpenBadURL(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"", "nope://h:1", "h:1", "/tmp/x", ":", "local:relative", "local:///x?y=1", "file:"} {
		b, err := baton.Open(ctx, u)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, does not match ErrInvalidArgument", u, err)
		}
		if !strings.Contains(err.Error(), "local") {
			t.Errorf("Open(%q) = %v, names no accepted form", u, err)
		}
	}
	//lint:ignore SA1012 a nil context is what is tested
	if _, err := baton.Open(nil, "local:"); !errors.Is(err, baton.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Open(nil, ...) = %v", err)
	}
}

// errDial stands for a network failure whose text quotes the URL, as some
// clients' errors do.
var errDial = errors.New("connection refused")

func init() {
	baton.Register("quoteurl-test", func(ctx context.Context, raw string) (baton.Backend, error) {
		return nil, fmt.Errorf("dial %s: %w", raw, errDial)
	})
}

func TestOpenMasksPassword(t *testing.T) {
	for _, pass := range []string{"hunter2", "p%40ss"} {
		raw := "quoteurl-test://user:" + pass + "@h:1/db?sentinel_password=" + pass + "-q"
		_, err := baton.Open(context.Background(), raw)
		if err == nil {
			t.Fatal("Open succeeded")
		}
		plain := strings.ReplaceAll(pass, "%40", "@")
		if strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), plain) {
			t.Errorf("error shows the password: %v", err)
		}
		if !strings.Contains(err.Error(), "user:xxxxx@h:1") {
			t.Errorf("error %q lost its text", err)
		}
		if !errors.Is(err, errDial) {
			t.Errorf("errors.Is does not see the cause of %v", err)
		}
	}
}

func TestRegisterRefuses(t *testing.T) {
	open := func(context.Context, string) (baton.Backend, error) { return nil, nil }
	for name, fn := range map[string]func(){
		"twice":      func() { baton.Register("LOCAL", open) },
		"nil":        func() { baton.Register("nil-opener-test", nil) },
		"empty":      func() { baton.Register("", open) },
		"with colon": func() { baton.Register("a:b", open) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register %s did not panic", name)
				}
			}()
			fn()
		}()
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://user:secret@h:6379/0":                      "redis://user:xxxxx@h:6379/0",
		"redis://:secret@h:6379":                            "redis://:xxxxx@h:6379",
		"etcd://root:p@ss@h1:2379,h2:2379/app":              "etcd://root:xxxxx@h1:2379,h2:2379/app",
		"redis://h:6379":                                    "redis://h:6379",
		"etcd://root@h:2379":                                "etcd://root@h:2379",
		"mysql://u@h/db?password_env=PW":                    "mysql://u@h/db?password_env=PW",
		"postgres://h/db?x=a:b@c":                           "postgres://h/db?x=a:b@c",
		"local:":                                            "local:",
		"redis+sentinel://h1,h2/m?sentinel_password=s3&x=1": "redis+sentinel://h1,h2/m?sentinel_password=xxxxx&x=1",
		"redis://:a@h/0?Sentinel_Password=b#f":              "redis://:xxxxx@h/0?Sentinel_Password=xxxxx#f",
		"postgres://u:s%2Fcret@h:5432/db?sslmode=off":       "postgres://u:xxxxx@h:5432/db?sslmode=off",
	} {
		if got := baton.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
