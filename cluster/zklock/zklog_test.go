package zklock

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// nopLogger silences the connections that tests make themselves.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// TestClientLogger: what the ZooKeeper client logs reaches the logger of
// lease.WithLogger at Warn.
func TestClientLogger(t *testing.T) {
	var buf bytes.Buffer
	z := zkLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	z.Printf("failed to connect to %s: %v", "127.0.0.1:1", "refused")
	if s := buf.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "failed to connect to 127.0.0.1:1: refused") {
		t.Fatalf("logged %q", s)
	}
}
