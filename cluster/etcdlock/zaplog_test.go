package etcdlock

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
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
