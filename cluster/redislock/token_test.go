package redislock

import (
	"context"
	"testing"

	"github.com/batonlock/baton"
)

func rwmutex(t *testing.T, b baton.Backend, name string) baton.RWMutex {
	t.Helper()
	m, err := b.RWMutex(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestRLockTokenRule checks that read holds follow one token rule whichever
// path of the scripts grants them: the fast path (free name), the slow path
// (beside another reader) and the handoff (queued behind a writer). A
// reader takes the counter as it is and a writer advances it by one.
func TestRLockTokenRule(t *testing.T) {
	s := startRedis(t)
	url := s.URL("ttl=2s")
	rw1 := rwmutex(t, open(t, url), "rule")
	rw2 := rwmutex(t, open(t, url), "rule")
	ctx := context.Background()
	c := s.Client()
	counter := func() baton.Token {
		n, err := c.Get(ctx, lockKeys(DefaultPrefix, krw, "rule")[5]).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return baton.Token(n)
	}
	rlock := func(m baton.RWMutex) baton.Token {
		t.Helper()
		h, err := m.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h.Token()
	}
	runlock := func(m baton.RWMutex) {
		t.Helper()
		if err := m.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	fast1 := rlock(rw1) // creates the counter
	runlock(rw1)
	fast2 := rlock(rw1)
	slow := rlock(rw2) // beside a reader: not the fast path
	runlock(rw2)
	runlock(rw1)
	if fast1 != fast2 || slow != fast2 || counter() != fast2 {
		t.Fatalf("read tokens: fast path %d then %d, slow path %d, counter %d; want all equal (readers do not advance the counter)",
			fast1, fast2, slow, counter())
	}

	w, err := rw1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w.Token() != fast2+1 {
		t.Fatalf("writer after readers of token %d drew %d, want %d", fast2, w.Token(), fast2+1)
	}
	got := make(chan baton.Token, 1)
	go func() {
		h, err := rw2.RLock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- h.Token()
	}()
	queue := lockKeys(DefaultPrefix, krw, "rule")[2]
	eventually(t, func() error {
		if c.ZCard(ctx, queue).Val() != 1 {
			return errNotQueued
		}
		return nil
	})
	if err := rw1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	handed := <-got
	fast3 := rlock(rw1) // beside the handed-over reader: slow path
	runlock(rw1)
	runlock(rw2)
	fast4 := rlock(rw1) // free again: fast path
	runlock(rw1)
	if handed != w.Token() || fast3 != w.Token() || fast4 != w.Token() {
		t.Fatalf("after the writer's token %d: handed-over reader %d, slow path %d, fast path %d; want the writer's token",
			w.Token(), handed, fast3, fast4)
	}
	w2, err := rw2.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w2.Token() != w.Token()+1 {
		t.Fatalf("second writer drew %d, want %d", w2.Token(), w.Token()+1)
	}
	if err := rw2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

var errNotQueued = errorString("the waiter is not queued yet")

type errorString string

func (e errorString) Error() string { return string(e) }
