package pglock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// TestInspect: Inspect and List report the holder of a Mutex (its token,
// its session's pid and address, its lease), a waiter of another client,
// a reader and a semaphore's permits; Remove of a Mutex makes its holder's
// Loss fire, and the waiter is granted with a higher token; Remove of a
// Semaphore ends its holder's hold and its capacity row.
func TestInspect(t *testing.T) {
	url := need(t)
	prefix := lease.WithPrefix(fmt.Sprintf("insp%d_", time.Now().UnixNano()%1e9))
	b := openT(t, url, prefix)
	in, ok := b.(baton.Inspector)
	if !ok {
		t.Fatal("the backend is not an Inspector")
	}
	ctx := context.Background()
	if _, err := in.Inspect(ctx, baton.KindMutex, "a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect of nothing: %v", err)
	}
	m := mutexT(t, b, "a/b")
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := mutexT(t, openT(t, url, prefix), "a/b")
	type got struct {
		h   baton.Hold
		err error
	}
	res := make(chan got, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		h, err := w.Lock(wctx)
		res <- got{h, err}
	}()
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
	sh, err := s.Acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}

	var info baton.Info
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if info, err = in.Inspect(ctx, baton.KindMutex, "a/b"); err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(info.Holders) != 1 || info.Waiters != 1 || info.Backend != "postgres" || info.LastToken != h.Token() {
		t.Fatalf("mutex: %+v, want one holder and one waiter, last token %d", info, h.Token())
	}
	host, _ := os.Hostname()
	if hd := info.Holders[0]; hd.Token != h.Token() || hd.Mode != "exclusive" || hd.PID != os.Getpid() || hd.Host != host ||
		!strings.HasPrefix(hd.Owner, "session ") || hd.TTL <= 0 || hd.TTL > faultTTL {
		t.Errorf("mutex holder: %+v, want token %d, pid %d, host %q, its session and a lease", hd, h.Token(), os.Getpid(), host)
	}
	list, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]baton.Info{}
	for _, i := range list {
		all[string(i.Kind)+" "+i.Name] = i
	}
	if i := all["rwmutex rw"]; len(i.Holders) != 1 || i.Holders[0].Mode != "shared" || i.Holders[0].PID != os.Getpid() {
		t.Errorf("rwmutex: %+v", i)
	}
	if i := all["semaphore sem"]; i.Capacity != 5 || len(i.Holders) != 1 || i.Holders[0].N != 3 || i.Waiters != 0 ||
		i.Holders[0].PID != os.Getpid() || i.Holders[0].Host != host {
		t.Errorf("semaphore: %+v", i)
	}
	if _, ok := all["mutex a/b"]; !ok || len(list) != 3 {
		t.Errorf("List: %+v", list)
	}

	if err := in.Remove(ctx, baton.KindMutex, "a/b"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Lost():
	case <-time.After(2 * faultTTL):
		t.Fatal("the holder of a removed mutex was not told")
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("waiter of a removed mutex: %v", r.err)
	}
	if r.h.Token() <= h.Token() {
		t.Errorf("token %d after the removed holder's %d", r.h.Token(), h.Token())
	}
	if err := m.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock of a removed mutex: %v, want ErrLost", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Error(err)
	}

	if err := in.Remove(ctx, baton.KindSemaphore, "sem"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sh.Lost():
	case <-time.After(2 * faultTTL):
		t.Fatal("the holder of a removed semaphore was not told")
	}
	if _, err := in.Inspect(ctx, baton.KindSemaphore, "sem"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect after Remove: %v", err)
	}
	if err := in.Remove(ctx, baton.KindSemaphore, "sem"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of nothing: %v", err)
	}
	if err := in.Remove(ctx, baton.KindCond, "none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of no cond: %v", err)
	}
}

// TestInspectForeignPool: a holder on a pool that does not set baton's
// application_name (New) is shown by its client address and session, with
// no pid rather than the server's.
func TestInspectForeignPool(t *testing.T) {
	url := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b, err := New(pool, lease.WithTTL(faultTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := mutexT(t, b, "foreign")
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctx)
	info, err := b.(baton.Inspector).Inspect(ctx, baton.KindMutex, "foreign")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || info.Holders[0].PID != 0 || info.Holders[0].Host != "127.0.0.1" ||
		!strings.HasPrefix(info.Holders[0].Owner, "session ") {
		t.Errorf("holders %+v, want one with no pid, host 127.0.0.1 and its session", info.Holders)
	}
}
