package redislock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

func inspector(t *testing.T, url string) (baton.Backend, baton.Inspector) {
	t.Helper()
	b, err := OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	in, ok := b.(baton.Inspector)
	if !ok {
		t.Fatalf("%T does not implement baton.Inspector", b)
	}
	return b, in
}

// eventually polls f until it returns nil or 5 s pass.
func eventually(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkHolder(t *testing.T, h baton.Holder, ttl time.Duration) {
	t.Helper()
	host, _ := os.Hostname()
	if h.PID != os.Getpid() || h.Host != host {
		t.Errorf("holder pid %d host %q, want %d %q", h.PID, h.Host, os.Getpid(), host)
	}
	if h.TTL <= 0 || h.TTL > ttl {
		t.Errorf("holder TTL %v, want in (0, %v]", h.TTL, ttl)
	}
	if d := time.Since(h.Since); d < -time.Second || d > time.Minute {
		t.Errorf("holder since %v, %v ago", h.Since, d)
	}
}

func TestInspectSingle(t *testing.T) {
	s := startRedis(t)
	ctx := context.Background()
	b, in := inspector(t, s.URL("ttl=2s"))
	b2, _ := inspector(t, s.URL("ttl=2s"))

	if _, err := in.Inspect(ctx, baton.KindMutex, "none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect of a missing name: %v, want fs.ErrNotExist", err)
	}
	if _, err := in.Inspect(ctx, baton.Kind("nosuchkind"), "x"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("Inspect of an unknown kind: %v, want ErrInvalidArgument", err)
	}
	if err := in.Remove(ctx, baton.KindMutex, "none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove of a missing name: %v, want fs.ErrNotExist", err)
	}

	// A mutex held here with a waiter in another backend.
	m, err := b.Mutex(ctx, "m{1}")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	hold, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := b2.Mutex(ctx, "m{1}")
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { _, err := m2.Lock(wctx); waited <- err }()
	eventually(t, func() error {
		info, err := in.Inspect(ctx, baton.KindMutex, "m{1}")
		if err != nil {
			return err
		}
		if info.Waiters != 1 || len(info.Holders) != 1 {
			return fmt.Errorf("info %+v, want 1 holder and 1 waiter", info)
		}
		return nil
	})
	info, err := in.Inspect(ctx, baton.KindMutex, "m{1}")
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "m{1}" || info.Kind != baton.KindMutex || info.Backend != "redis" || info.LastToken != hold.Token() {
		t.Errorf("info %+v, want name m{1}, kind mutex, backend redis, last token %d", info, hold.Token())
	}
	h := info.Holders[0]
	checkHolder(t, h, 2*time.Second)
	if h.Token != hold.Token() || h.Mode != "exclusive" {
		t.Errorf("holder %+v, want token %d, exclusive", h, hold.Token())
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}

	// Readers of an RWMutex, permits of a semaphore, a waiter of a cond.
	rw, err := b.RWMutex(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	rw2, err := b2.RWMutex(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	defer rw2.Close()
	if _, err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rw2.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	sem, err := b.Semaphore(ctx, "sem", 5)
	if err != nil {
		t.Fatal(err)
	}
	defer sem.Close()
	if _, err := sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	cond, err := b.Cond(ctx, "cond")
	if err != nil {
		t.Fatal(err)
	}
	defer cond.Close()
	cm, err := b2.Mutex(ctx, "cond-lock")
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if _, err := cm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	condDone := make(chan error, 1)
	go func() { condDone <- cond.Wait(cctx, cm) }()
	defer func() { ccancel(); <-condDone }()
	eventually(t, func() error {
		info, err := in.Inspect(ctx, baton.KindCond, "cond")
		if err != nil {
			return err
		}
		if info.Waiters != 1 {
			return fmt.Errorf("cond info %+v, want 1 waiter", info)
		}
		return nil
	})

	info, err = in.Inspect(ctx, baton.KindRWMutex, "rw")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 2 || info.Holders[0].Mode != "shared" || info.Holders[1].Mode != "shared" {
		t.Fatalf("rwmutex info %+v, want two shared holders", info)
	}
	info, err = in.Inspect(ctx, baton.KindSemaphore, "sem")
	if err != nil {
		t.Fatal(err)
	}
	if info.Capacity != 5 || len(info.Holders) != 1 || info.Holders[0].N != 2 {
		t.Fatalf("semaphore info %+v, want capacity 5, one holder of 2", info)
	}
	checkHolder(t, info.Holders[0], 2*time.Second)

	list, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]baton.Kind{"m{1}": baton.KindMutex, "rw": baton.KindRWMutex, "sem": baton.KindSemaphore,
		"cond": baton.KindCond, "cond-lock": baton.KindMutex}
	if len(list) != len(want) {
		t.Fatalf("List: %d objects %+v, want %v", len(list), list, want)
	}
	for _, i := range list {
		if want[i.Name] != i.Kind {
			t.Errorf("List: %s %q not expected", i.Kind, i.Name)
		}
	}

	// Remove: the holder learns of it at its next renewal.
	removeLoses(t, in, m, hold, "m{1}")
	// The name works again, with a greater token.
	h2, err := m2.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Token() <= hold.Token() {
		t.Errorf("token after Remove %d, not above %d", h2.Token(), hold.Token())
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestInspectCluster(t *testing.T) {
	ss := startCluster(t, 3)
	ctx := context.Background()
	b, in := inspector(t, clusterURL(ss, "ttl=2s"))
	// Names spread over the slots of every master.
	const n = 24
	for i := range n {
		m, err := b.Mutex(ctx, fmt.Sprintf("name-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	list, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("List found %d objects, want %d: %+v", len(list), n, list)
	}
	for _, i := range list {
		if len(i.Holders) != 0 || i.LastToken == 0 {
			t.Errorf("%+v: want no holder and a last token", i)
		}
	}
	if err := in.Remove(ctx, baton.KindMutex, "name-3"); err != nil {
		t.Fatal(err)
	}
	if list, _ = in.List(ctx); len(list) != n-1 {
		t.Fatalf("List after Remove found %d objects, want %d", len(list), n-1)
	}
}

// removeLoses removes the mutex name, which m holds with hold, through the
// Inspector: the holder learns of it at its next renewal, its Unlock
// reports the loss, and the name is gone.
func removeLoses(t *testing.T, in baton.Inspector, m baton.Mutex, hold baton.Hold, name string) {
	t.Helper()
	ctx := context.Background()
	if err := in.Remove(ctx, baton.KindMutex, name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the hold of a removed mutex was not lost")
	}
	if err := m.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock after Remove: %v, want ErrLost", err)
	}
	if _, err := in.Inspect(ctx, baton.KindMutex, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect after Remove: %v, want fs.ErrNotExist", err)
	}
}
