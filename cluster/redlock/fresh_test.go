package redlock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/cluster/lease"
)

// TestFirstTryLockFreshPrefix: the first TryLock of a prefix whose nodes
// have no marker yet, on nodes up for longer than a TTL, is granted: the
// nodes' readiness is checked in the attempt, not after it was refused.
func TestFirstTryLockFreshPrefix(t *testing.T) {
	ss := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	// A TTL of 1.5s needs an uptime of 3s (whole seconds, and one more).
	time.Sleep(3100 * time.Millisecond)
	for i := range 3 {
		url := redlockURL(ss, "ttl=1500ms&prefix=fresh"+string(rune('a'+i))+":")
		if _, err := mutex(t, open(t, url), "first").TryLock(context.Background()); err != nil {
			t.Fatalf("first TryLock on a fresh prefix, run %d: %v", i, err)
		}
	}
}

// lockedBuf is a log destination safe for concurrent writes.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *lockedBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFreshNodesWaitSaid: on nodes that started empty, a TryLock is
// refused with ErrRestartWait, not ErrLocked; a Lock waits, says so once
// in the log, and one whose context ends in the wait says it was that
// wait. Nodes whose run ids the URL gives need no wait.
func TestFreshNodesWaitSaid(t *testing.T) {
	ss := []*redistest.Server{redistest.StartEmpty(t), redistest.StartEmpty(t), redistest.StartEmpty(t)}
	var log lockedBuf
	b, err := OpenURL(context.Background(), redlockURL(ss, "ttl=1500ms"), lease.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := mutex(t, b, "fresh")
	_, err = m.TryLock(context.Background())
	// The error names the nodes whose wait refused the attempt: a
	// majority, which need not include the first.
	named := false
	for _, s := range ss {
		named = named || strings.Contains(err.Error(), s.Addr())
	}
	if !errors.Is(err, ErrRestartWait) || errors.Is(err, baton.ErrLocked) || !named {
		t.Fatalf("TryLock on fresh nodes: %v, want ErrRestartWait naming the nodes, not ErrLocked", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = m.Lock(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrRestartWait) {
		t.Fatalf("Lock whose context ends in the wait: %v, want DeadlineExceeded and ErrRestartWait", err)
	}
	start := time.Now()
	if _, err := m.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("Lock granted after %v", time.Since(start))
	if out := log.String(); strings.Count(out, "waiting up to") != 1 || !strings.Contains(out, "started empty and may have lost grants") {
		t.Fatalf("log, want one notice of the wait:\n%s", out)
	}

	fresh := []*redistest.Server{redistest.StartEmpty(t), redistest.StartEmpty(t), redistest.StartEmpty(t)}
	ids := fresh[0].RunID() + "," + fresh[1].RunID() + "," + fresh[2].RunID()
	if _, err := mutex(t, open(t, redlockURL(fresh, "ttl=1500ms&run_id="+ids)), "fresh").TryLock(context.Background()); err != nil {
		t.Fatalf("TryLock on fresh nodes whose run ids the URL gives: %v", err)
	}
}
