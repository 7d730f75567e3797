package zklock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

func TestInspect(t *testing.T) {
	addr := standalone(t)
	prefix := fmt.Sprintf("inspect-%d", time.Now().UnixNano())
	b := open(t, "zk://"+addr+"/"+prefix)
	in, ok := b.(baton.Inspector)
	if !ok {
		t.Fatal("the backend is not an Inspector")
	}
	ctx := context.Background()
	m, err := b.Mutex(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A waiter of another Backend: one of the same Backend waits in the
	// process (the pass line), with no node on the server.
	w, err := open(t, "zk://"+addr+"/"+prefix).Mutex(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res := make(chan error, 1)
	go func() { _, err := w.Lock(ctx); res <- err }()
	rw, err := b.RWMutex(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := b.Semaphore(ctx, "sem", 5)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Acquire(ctx, 3); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var info baton.Info
	for {
		info, err = in.Inspect(ctx, baton.KindMutex, "a/b")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(info.Holders) != 1 || info.Holders[0].Token != h.Token() || info.Waiters != 1 || info.Backend != "zookeeper" {
		t.Errorf("mutex: %+v, want one holder with token %d and one waiter", info, h.Token())
	}
	list, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]baton.Info{}
	for _, i := range list {
		got[string(i.Kind)+" "+i.Name] = i
	}
	if i := got["rwmutex rw"]; len(i.Holders) != 1 || i.Holders[0].Mode != "shared" {
		t.Errorf("rwmutex: %+v", i)
	}
	if i := got["semaphore sem"]; i.Capacity != 5 || len(i.Holders) != 1 || i.Holders[0].N != 3 {
		t.Errorf("semaphore: %+v", i)
	}
	if _, ok := got["mutex a/b"]; !ok || len(list) != 3 {
		t.Errorf("List: %+v", list)
	}
	// The owner is the holding Backend's id, the same for every hold of b.
	ownerOf := func(i baton.Info) string {
		if len(i.Holders) == 0 {
			return ""
		}
		return i.Holders[0].Owner
	}
	owner := ownerOf(info)
	if len(owner) != 16 || ownerOf(got["rwmutex rw"]) != owner || ownerOf(got["semaphore sem"]) != owner {
		t.Errorf("owners: mutex %q, rwmutex %+v, semaphore %+v; want one 16-digit id", owner, got["rwmutex rw"].Holders, got["semaphore sem"].Holders)
	}
	if err := in.Remove(ctx, baton.KindMutex, "a/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Inspect(ctx, baton.KindMutex, "a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect after Remove: %v", err)
	}
	if err := in.Remove(ctx, baton.KindMutex, "a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of nothing: %v", err)
	}
	if err := <-res; !errors.Is(err, baton.ErrLost) {
		t.Errorf("waiter of a removed mutex: %v, want ErrLost", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock of a removed mutex: %v, want ErrLost", err)
	}
}
