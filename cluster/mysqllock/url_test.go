package mysqllock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

func TestParseURL(t *testing.T) {
	cfg, opts, err := parseURL("mysql://u:p%40ss@db.example:3307/locks?ttl=3s&prefix=x_&timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "u" || cfg.Passwd != "p@ss" || cfg.Addr != "db.example:3307" || cfg.DBName != "locks" ||
		cfg.Timeout != 2*time.Second || !cfg.InterpolateParams || !cfg.MultiStatements {
		t.Fatalf("config %+v", cfg)
	}
	// The driver's own options win over those OpenURL sets.
	if cfg, _, err := parseURL("mysql://u@db.example/locks?multiStatements=false&interpolateParams=false"); err != nil || cfg.MultiStatements || cfg.InterpolateParams {
		t.Fatalf("config with the driver's options off: %+v, %v", cfg, err)
	}
	c, err := lease.Build(lease.Spec{Prefix: DefaultPrefix}, opts)
	if err != nil || c.TTL != 3*time.Second || c.Prefix != "x_" {
		t.Fatalf("lease config %+v, %v", c, err)
	}
	cfg, _, err = parseURL("mysql://root@host/db")
	if err != nil || cfg.Addr != "host:3306" {
		t.Fatalf("default port: %+v %v", cfg, err)
	}
	cfg, _, err = parseURL("mysql+unix://root@/run/mysqld/mysqld.sock?db=locks")
	if err != nil || cfg.Net != "unix" || cfg.Addr != "/run/mysqld/mysqld.sock" || cfg.DBName != "locks" {
		t.Fatalf("socket URL: %+v %v", cfg, err)
	}
}

// Bad URLs and options are refused before any connection: the host does
// not exist.
func TestOpenURLRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"mysql://", "mysql://h", "mysql://h/", "mysql://h/a/b", "postgres://h/db", "mysql://h/db#x",
		"mysql://h/db?ttl=soon", "mysql://h/db?ttl=500ms", "mysql://h/db?ttl=2s&renew_every=2s",
		"mysql://h/db?prefix=bad-prefix", "mysql://h/db?ttl=1s&ttl=2s", "mysql+unix://h/sock?db=x",
		"mysql://h/db?tls=nosuchconfig",
	} {
		if _, err := OpenURL(ctx, u); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("OpenURL(%q): %v, want ErrInvalidArgument", u, err)
		}
	}
	if _, err := New(ctx, nil); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
}
