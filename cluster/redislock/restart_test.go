package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// A server killed and restarted empty on the same port forgets the lease
// of A. B must not be granted until A's lease could have expired: A's Loss
// has fired by then, and B's token is above A's.
func TestRestartEmptyNoOverlap(t *testing.T) {
	for _, kind := range []string{"mutex", "rwmutex", "semaphore"} {
		t.Run(kind, func(t *testing.T) { restartEmpty(t, kind) })
	}
}

func restartEmpty(t *testing.T, kind string) {
	const ttl = 1500 * time.Millisecond
	s := startRedis(t)
	url := s.URL("ttl=1500ms")
	a := lockerOf(t, open(t, url), kind, "restart-empty")
	b := lockerOf(t, open(t, url), kind, "restart-empty")
	tb := lockerOf(t, open(t, url), kind, "restart-empty")
	ha, err := a.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan time.Time, 1)
	go func() { <-ha.Lost(); lost <- time.Now() }()
	killed := time.Now()
	s.Restart()

	// A try-lock is refused, not granted, while A's lease may run; as
	// the restart-safety wait, which is not ErrLocked.
	if _, err := tb.try(context.Background()); !errors.Is(err, ErrRestartWait) || errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock on the restarted server: %v, want ErrRestartWait and not ErrLocked", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	hb, err := b.lock(ctx)
	granted := time.Now()
	if err != nil {
		t.Fatalf("B: %v", err)
	}
	select {
	case at := <-lost:
		t.Logf("A lost %v after the kill, B granted %v after it", at.Sub(killed), granted.Sub(killed))
	default:
		t.Fatalf("B granted %v after the kill, while A's Loss has not fired", granted.Sub(killed))
	}
	if granted.Sub(killed) < ttl-(ttl/100+2*time.Millisecond) {
		t.Fatalf("B granted %v after the kill, before A's lease of %v could expire", granted.Sub(killed), ttl)
	}
	if kind != "semaphore" && hb.Token() <= ha.Token() {
		t.Fatalf("B's token %d <= A's %d", hb.Token(), ha.Token())
	}
	if err := a.unlock(context.Background()); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock of A's lost hold: %v, want ErrLost", err)
	}
	if err := b.unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Now that the marker is back, grants are immediate again.
	start := time.Now()
	if _, err := a.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Lock on a server up for more than a TTL took %v", d)
	}
	if err := a.unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}
