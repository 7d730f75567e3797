package redislock

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

// TestFreshServerWaitSaid: on a server that started empty, a TryLock is
// refused with ErrRestartWait naming the server and the wait, not with
// ErrLocked (nobody holds the lock); a Lock waits, says so once in the
// log, and one whose context ends during the wait says it was that wait.
func TestFreshServerWaitSaid(t *testing.T) {
	s := redistest.StartEmpty(t)
	var log syncBuf
	b, err := OpenURL(context.Background(), s.URL("ttl=1500ms"), lease.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := mutex(t, b, "fresh")
	_, err = m.TryLock(context.Background())
	var w *RestartWaitError
	if !errors.Is(err, ErrRestartWait) || errors.Is(err, baton.ErrLocked) || !errors.As(err, &w) {
		t.Fatalf("TryLock on a fresh server: %v, want ErrRestartWait, not ErrLocked", err)
	}
	if w.Addr != s.Addr() || w.Left <= 0 || w.Left > 3*time.Second || !strings.Contains(err.Error(), "started empty") {
		t.Fatalf("TryLock's wait: %+v (%v), want server %s and a wait of at most 3s", w, err, s.Addr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = m.Lock(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrRestartWait) {
		t.Fatalf("Lock whose context ends in the wait: %v, want DeadlineExceeded and ErrRestartWait", err)
	}

	start := time.Now()
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := mutex(t, b, "fresh-"+string(rune('a'+i)))
			if _, err := m.Lock(context.Background()); err != nil {
				t.Error(err)
				return
			}
			if err := m.Unlock(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	t.Logf("three Locks granted %v after the first", time.Since(start))
	out := log.String()
	if n := strings.Count(out, "waiting up to"); n != 1 || !strings.Contains(out, s.Addr()+" started empty and may have lost grants") {
		t.Fatalf("log (%d notices of the wait, want 1 naming %s):\n%s", n, s.Addr(), out)
	}
	// Once ready, a TryLock is granted at once.
	if _, err := m.TryLock(context.Background()); err != nil {
		t.Fatalf("TryLock after the wait: %v", err)
	}
}

// TestRunIDSkipsWait: a server whose run id the URL gives (the caller
// started it) grants at once; another's run id does not vouch for it.
func TestRunIDSkipsWait(t *testing.T) {
	s, other := redistest.StartEmpty(t), redistest.StartEmpty(t)
	ctx := context.Background()
	m := mutex(t, open(t, s.URL("ttl=3s&run_id="+other.RunID())), "runid")
	if _, err := m.TryLock(ctx); !errors.Is(err, ErrRestartWait) {
		t.Fatalf("TryLock with another server's run id: %v, want ErrRestartWait", err)
	}
	m = mutex(t, open(t, s.URL("ttl=3s&run_id="+other.RunID()+","+s.RunID())), "runid")
	if _, err := m.TryLock(ctx); err != nil {
		t.Fatalf("TryLock with the server's run id: %v", err)
	}
	// The run id is tied to the process: after a restart it vouches for
	// nothing.
	before := s.RunID()
	s.Restart()
	if s.RunID() == before {
		t.Fatal("the run id did not change with the restart")
	}
	m = mutex(t, open(t, s.URL("ttl=3s&run_id="+before)), "runid")
	if _, err := m.TryLock(ctx); !errors.Is(err, ErrRestartWait) {
		t.Fatalf("TryLock after a restart: %v, want ErrRestartWait", err)
	}
	for _, q := range []string{"run_id=", "run_id=abc", "run_id=" + strings.Repeat("A", 40), "run_id=" + s.RunID() + "&run_id=" + s.RunID()} {
		if b, err := OpenURL(ctx, s.URL(q)); !errors.Is(err, baton.ErrInvalidArgument) {
			if b != nil {
				b.Close()
			}
			t.Errorf("OpenURL with %s: %v, want ErrInvalidArgument", q, err)
		}
	}
}
