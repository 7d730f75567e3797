package mysqllock

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/batonlock/baton"
)

func TestInspect(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	b := openT(t, s.url(testQuery))
	in := b.(baton.Inspector)
	name := testName(t)
	m, _ := b.Mutex(ctx, name)
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := in.Inspect(ctx, baton.KindMutex, name)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != h.Token() || info.LastToken != h.Token() || info.Holders[0].Owner == "" {
		t.Fatalf("Inspect of a held mutex: %+v, %v", info, err)
	}
	sem, _ := b.Semaphore(ctx, name, 3)
	if _, err := sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	info, err = in.Inspect(ctx, baton.KindSemaphore, name)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].N != 2 || info.Capacity != 3 || info.Holders[0].Owner == "" {
		t.Fatalf("Inspect of a semaphore: %+v, %v", info, err)
	}
	list, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, i := range list {
		if i.Name == name {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("List has %d objects named %q, want 2", found, name)
	}
	if err := in.Remove(ctx, baton.KindSemaphore, name); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Inspect(ctx, baton.KindSemaphore, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect after Remove: %v", err)
	}
	if err := in.Remove(ctx, baton.KindMutex, name); err != nil {
		t.Fatal(err)
	}
	other, _ := openT(t, s.url(testQuery)).Mutex(ctx, name)
	h2, err := other.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after Remove: %v", err)
	}
	if h2.Token() <= h.Token() {
		t.Fatalf("token %d after Remove, before it %d: the counter went back", h2.Token(), h.Token())
	}
	if _, err := in.Inspect(ctx, baton.KindCond, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect of a Cond without waiters: %v", err)
	}
}
