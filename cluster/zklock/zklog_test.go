package zklock

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/lease"
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

// TestOpenURLLogs: the connection failures of the client OpenURL makes
// reach the logger of lease.WithLogger.
func TestOpenURLLogs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	var buf lockedBuffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if b, err := OpenURL(ctx, "zk://"+addr, lease.WithLogger(l)); err == nil {
		b.Close()
		t.Fatal("OpenURL of a closed port succeeded")
	}
	if s := buf.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "zookeeper client: ") || !strings.Contains(s, addr) {
		t.Fatalf("the client's failures were not logged:\n%s", s)
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
