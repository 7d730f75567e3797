package baton_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// syncBuffer is a bytes.Buffer for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogObserver: at Info, normal work logs nothing and a misuse logs a
// warning; at Debug, acquisitions and releases are logged with their
// attributes.
func TestLogObserver(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	var info, debug syncBuffer
	infoLog := slog.New(slog.NewTextHandler(&info, &slog.HandlerOptions{Level: slog.LevelInfo}))
	debugLog := slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := baton.Observe(b, baton.Observers(baton.LogObserver(infoLog), nil, baton.LogObserver(debugLog))); err != nil {
		t.Fatal(err)
	}
	m, err := b.Mutex(ctx, "jobs/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if info.String() != "" {
		t.Errorf("normal work logged at Info:\n%s", info.String())
	}
	if err := m.Unlock(ctx); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
	if s := info.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "class=not_held") || strings.Count(s, "\n") != 1 {
		t.Errorf("an Unlock of nothing logged at Info as:\n%s", s)
	}
	d := debug.String()
	for _, want := range []string{`msg="baton: acquire"`, `msg="baton: acquired"`, "token=", `msg="baton: released"`, "held=",
		"backend=local", "kind=mutex", "name=jobs/a", "class=locked"} {
		if !strings.Contains(d, want) {
			t.Errorf("debug log lacks %s:\n%s", want, d)
		}
	}
}
