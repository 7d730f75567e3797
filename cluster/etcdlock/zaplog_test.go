package etcdlock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/batonlock/baton/cluster/lease"
)

// TestClientLogger: the etcd client that OpenURL makes logs to the logger
// of lease.WithLogger, with zap's levels and fields kept.
func TestClientLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o, err := buildOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	o.log = l
	cfg, err := clientConfig(mustParse(t, "etcd://127.0.0.1:1"), o, t.Context())
	if err != nil {
		t.Fatal(err)
	}
	zl := cfg.Logger.Named("retry").With(zap.String("target", "etcd-endpoints://x"))
	zl.Info("routine")
	zl.Warn("retrying of unary invoker failed", zap.Error(errors.New("unavailable")), zap.Int("attempt", 2))
	s := buf.String()
	if strings.Contains(s, "routine") {
		t.Errorf("an Info message passed a Warn logger:\n%s", s)
	}
	for _, want := range []string{"level=WARN", `msg="etcd client retry: retrying of unary invoker failed"`, "attempt=2", "error=unavailable", "target=etcd-endpoints://x"} {
		if !strings.Contains(s, want) {
			t.Errorf("the client's warning lacks %s:\n%s", want, s)
		}
	}
}

func mustParse(t *testing.T, raw string) target {
	t.Helper()
	tg, err := parseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestOpenURLLogs: the retries of the client OpenURL makes, against an
// address where nothing listens, reach the logger of lease.WithLogger.
func TestOpenURLLogs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var buf lockedBuffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if b, err := OpenURL(ctx, "etcd://"+addr, lease.WithLogger(l), WithDialTimeout(time.Second)); err == nil {
		b.Close()
		t.Fatal("OpenURL of a closed port succeeded")
	}
	if s := buf.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "etcd client") {
		t.Fatalf("the client's retries were not logged:\n%s", s)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
