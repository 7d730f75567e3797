package baton_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// losses records the EventLost events of an observed Backend.
type losses struct {
	mu sync.Mutex
	ev []baton.Event
}

func (l *losses) Observe(e baton.Event) {
	if e.Type == baton.EventLost {
		l.mu.Lock()
		l.ev = append(l.ev, e)
		l.mu.Unlock()
	}
}

func (l *losses) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ev)
}

func (l *losses) last() baton.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ev[len(l.ev)-1]
}

// TestObserveLossWhenItFires: a held object removed behind its holder's
// back (baton rm) is reported lost by the time its Lost channel is closed,
// before the holder gives it back, once; the release that finds it lost
// reports nothing more, and holds given back normally are no losses. On
// each same-host mechanism whose loss is a removal (mutexes, the flock and
// shared-memory RW locks, write and read holds, and the shared-memory
// semaphore).
func TestObserveLossWhenItFires(t *testing.T) {
	ctx := context.Background()
	type lockCase struct {
		name  string
		opt   local.Option
		kind  baton.Kind
		read  bool
		sem   bool
		owner bool // hold under an owner, reentrantly
	}
	cases := []lockCase{
		{name: "futex", opt: local.WithMutex(local.MutexFutex), kind: baton.KindMutex},
		{name: "futex-owner", opt: local.WithMutex(local.MutexFutex), kind: baton.KindMutex, owner: true},
		{name: "flock", opt: local.WithMutex(local.MutexFlock), kind: baton.KindMutex},
		{name: "rw-flock", opt: local.WithRWMutex(local.RWFlock), kind: baton.KindRWMutex},
		{name: "rw-flock-read", opt: local.WithRWMutex(local.RWFlock), kind: baton.KindRWMutex, read: true},
		{name: "rw-shm", opt: local.WithRWMutex(local.RWShm), kind: baton.KindRWMutex},
		{name: "rw-shm-read", opt: local.WithRWMutex(local.RWShm), kind: baton.KindRWMutex, read: true},
		{name: "sem-shm", opt: local.WithSemaphore(local.SemShm), kind: baton.KindSemaphore, sem: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := local.Open(t.TempDir(), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			l := &losses{}
			if err := baton.Observe(b, l); err != nil {
				t.Fatal(err)
			}
			hctx := ctx
			if tc.owner {
				hctx = baton.WithOwner(ctx)
			}
			var lock func() (baton.Hold, error)
			var unlock func() error
			switch {
			case tc.sem:
				s, err := b.Semaphore(ctx, "x", 2)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				lock = func() (baton.Hold, error) { return s.Acquire(hctx, 1) }
				unlock = func() error { return s.Release(hctx, 1) }
			case tc.kind == baton.KindRWMutex:
				rw, err := b.RWMutex(ctx, "x")
				if err != nil {
					t.Fatal(err)
				}
				defer rw.Close()
				lock, unlock = func() (baton.Hold, error) { return rw.Lock(hctx) }, func() error { return rw.Unlock(hctx) }
				if tc.read {
					lock, unlock = func() (baton.Hold, error) { return rw.RLock(hctx) }, func() error { return rw.RUnlock(hctx) }
				}
			default:
				m, err := b.Mutex(ctx, "x")
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				lock, unlock = func() (baton.Hold, error) { return m.Lock(hctx) }, func() error { return m.Unlock(hctx) }
			}
			for range 3 {
				if _, err := lock(); err != nil {
					t.Fatal(err)
				}
				if err := unlock(); err != nil {
					t.Fatal(err)
				}
			}
			if n := l.count(); n != 0 {
				t.Fatalf("%d EventLost after normal releases, want 0", n)
			}
			hd, err := lock()
			if err != nil {
				t.Fatal(err)
			}
			if tc.owner {
				// A reentrant hold: the loss is still one.
				if _, err := lock(); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.(baton.Inspector).Remove(ctx, tc.kind, "x"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-hd.Lost():
			case <-time.After(5 * time.Second):
				t.Fatal("Lost did not fire after the held object was removed")
			}
			// The watcher is told right after the channel closes, in the
			// goroutine that fired the loss.
			for end := time.Now().Add(2 * time.Second); l.count() == 0 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			if n := l.count(); n != 1 {
				t.Fatalf("%d EventLost while the lost hold is still held, want 1", n)
			}
			if e := l.last(); e.Op != "hold" || e.Kind != tc.kind || e.Name != "x" || !errors.Is(e.Err, baton.ErrLost) {
				t.Errorf("EventLost %+v: want Op hold, kind %s, name x, an ErrLost", e, tc.kind)
			}
			if tc.owner {
				if err := unlock(); err != nil {
					t.Fatalf("inner Unlock: %v", err)
				}
			}
			if err := unlock(); err != nil && !errors.Is(err, baton.ErrLost) {
				t.Fatalf("release of the lost hold: %v", err)
			}
			if n := l.count(); n != 1 {
				t.Errorf("%d EventLost after the release, want 1", n)
			}
		})
	}
}
