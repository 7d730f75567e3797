package lease

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
)

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

// TestKeeperLogs: a renewal is logged at Debug, a failed one at Warn, both
// with the lock's name.
func TestKeeperLogs(t *testing.T) {
	var buf lockedBuffer
	c, err := Build(Spec{}, []Option{WithTTL(200 * time.Millisecond), WithRenewEvery(20 * time.Millisecond),
		WithDrift(10 * time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fail := false
	k := StartKeeper(time.Now(), &c, func(ctx context.Context) (time.Time, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return time.Time{}, errors.New("connection refused")
		}
		return time.Now(), nil
	}, driver.NewLoss(), "jobs/a")
	defer k.Stop()
	waitLog := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(buf.String(), want); {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log:\n%s", want, buf.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitLog(`level=DEBUG msg="baton: lease renewed" name=jobs/a`)
	mu.Lock()
	fail = true
	mu.Unlock()
	waitLog(`level=WARN msg="baton: lease renewal failed; retrying" name=jobs/a err="connection refused"`)
}
