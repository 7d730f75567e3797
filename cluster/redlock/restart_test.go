package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/internal/redistest"
)

// Redlock: a majority of nodes restarted empty must not vote for B until
// A's lease could have expired on them.
func TestRedlockRestartEmptyNoOverlap(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	ss := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	url := redlockURL(ss, "ttl=1500ms&node_timeout=100ms")
	a := mutex(t, open(t, url), "restart-redlock")
	b := mutex(t, open(t, url), "restart-redlock")
	ha, err := a.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan time.Time, 1)
	go func() { <-ha.Lost(); lost <- time.Now() }()
	killed := time.Now()
	ss[0].Restart()
	ss[1].Restart()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	hb, err := b.Lock(ctx)
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
	if hb.Token() <= ha.Token() {
		t.Fatalf("B's token %d <= A's %d", hb.Token(), ha.Token())
	}
	if err := b.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}
