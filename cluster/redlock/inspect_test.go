package redlock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/internal/redistest"
)

func TestInspectRedlock(t *testing.T) {
	ss := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	ctx := context.Background()
	b, in := inspector(t, redlockURL(ss, "ttl=2s&node_timeout=200ms"))
	m, err := b.Mutex(ctx, "rl")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	hold, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Inspect(ctx, baton.KindSemaphore, "rl"); !errors.Is(err, baton.ErrUnsupported) {
		t.Fatalf("Inspect of a semaphore in Redlock mode: %v, want ErrUnsupported", err)
	}
	// The primitives Redlock mode does not serve say so.
	if _, err := b.RWMutex(ctx, "rw"); !errors.Is(err, baton.ErrUnsupported) || !strings.Contains(err.Error(), "Mutex only") {
		t.Errorf("RWMutex in Redlock mode: %v, want ErrUnsupported naming the Mutex", err)
	}
	if _, err := b.Semaphore(ctx, "s", 2); !errors.Is(err, baton.ErrUnsupported) {
		t.Errorf("Semaphore in Redlock mode: %v, want ErrUnsupported", err)
	}
	if _, err := b.Cond(ctx, "c"); !errors.Is(err, baton.ErrUnsupported) {
		t.Errorf("Cond in Redlock mode: %v, want ErrUnsupported", err)
	}
	// Lock returned at a majority; wait until the third node has the hold
	// too, then take one node down: the majority still answers.
	key := redisnode.KeyBase(DefaultPrefix, keyKind, "rl") + "lock"
	for _, s := range ss {
		c := s.Client()
		eventually(t, func() error {
			if n, err := c.Exists(ctx, key).Result(); err != nil || n != 1 {
				return fmt.Errorf("node %s: exists %d, %v", s.Addr(), n, err)
			}
			return nil
		})
	}
	ss[2].Kill()
	info, err := in.Inspect(ctx, baton.KindMutex, "rl")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || info.LastToken < hold.Token() || info.Waiters != -1 {
		t.Fatalf("info %+v, want one holder, last token >= %d, waiters -1", info, hold.Token())
	}
	checkHolder(t, info.Holders[0], 2*time.Second)
	list, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "rl" || list[0].Kind != baton.KindMutex {
		t.Fatalf("List %+v, want the mutex rl", list)
	}
	removeLoses(t, in, m, hold, "rl")
	// A second node down: no majority.
	ss[1].Kill()
	if _, err := in.Inspect(ctx, baton.KindMutex, "rl"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect with 1 of 3 nodes: %v, want an error", err)
	}
}
