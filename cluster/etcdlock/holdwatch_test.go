package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// The holds of a Backend in one directory share one watch, which serves
// hold after hold, tells each hold's loss from its neighbours', and still
// fires losses after it broke and the history it would have resumed from
// was compacted.
func testSharedHoldWatch(t *testing.T, c *cluster) {
	t.Run("InARow", func(t *testing.T) { testHoldWatchInARow(t, c) })
	t.Run("Neighbours", func(t *testing.T) { testHoldWatchNeighbours(t, c) })
	t.Run("ManyNames", func(t *testing.T) { testHoldWatchManyNames(t, c) })
	t.Run("Broken", func(t *testing.T) { testHoldWatchBroken(t, c) })
	t.Run("LateEntry", func(t *testing.T) { testHoldWatchLateEntry(t, c) })
}

// keyOf returns the key under dir created at revision rev.
func keyOf(t *testing.T, cl *clientv3.Client, dir string, rev int64) string {
	t.Helper()
	resp, err := cl.Get(context.Background(), dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if kv.CreateRevision == rev {
			return string(kv.Key)
		}
	}
	t.Fatalf("no key under %s created at %d", dir, rev)
	return ""
}

func lostWithin(h baton.Hold, d time.Duration) bool {
	select {
	case <-h.Lost():
		return true
	case <-time.After(d):
		return false
	}
}

// dirWatchOf returns the watch of dir, or nil.
func dirWatchOf(d *backend, dir string) *dirWatch {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	return d.dirs[dir]
}

// breakWatch ends dw's current watch once it is up, as a member that
// goes away would.
func breakWatch(t *testing.T, dw *dirWatch) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		dw.mu.Lock()
		up := dw.synced
		if up {
			dw.cancel()
		}
		dw.mu.Unlock()
		if up {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch is not up")
		}
	}
}

// Many holds in a row on one handle use one watch; a hold whose key an
// outsider deletes loses, and the hold after it does not.
func testHoldWatchInARow(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, d := fast(t, c, "hwrow")
	other := c.client(t)
	m := must(b.Mutex(ctx, "m")).get(t)
	dir := d.dir(baton.KindMutex, "m") + "q/"
	var first *dirWatch
	for i := range 300 {
		h := must(m.Lock(ctx)).get(t)
		dw := dirWatchOf(d, dir)
		if first == nil {
			first = dw
		} else if dw != first {
			t.Fatalf("hold %d: a watch of its own, not the one of the holds before", i)
		}
		if i%50 == 49 {
			k := keyOf(t, other, dir, int64(h.Token()>>passBits))
			if _, err := other.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			if !lostWithin(h, 2*time.Second) {
				t.Fatalf("hold %d: no loss 2s after its key was deleted", i)
			}
			if err := m.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
				t.Fatalf("Unlock of hold %d, whose key was deleted: %v, want ErrLost", i, err)
			}
			continue
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of hold %d: %v", i, err)
		}
	}
}

// Holds of one directory (permits of a semaphore, on four handles): the
// delete of one's key fires only that one's loss.
func testHoldWatchNeighbours(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, d := fast(t, c, "hwneigh")
	other := c.client(t)
	dir := d.dir(baton.KindSemaphore, "s") + "q/"
	var ss []baton.Semaphore
	for range 4 {
		ss = append(ss, must(b.Semaphore(ctx, "s", 4)).get(t))
	}
	for round := range 20 {
		hs := make([]baton.Hold, len(ss))
		for i, s := range ss {
			hs[i] = must(s.Acquire(ctx, 1)).get(t)
		}
		victim := round % len(ss)
		if _, err := other.Delete(ctx, keyOf(t, other, dir, int64(hs[victim].Token()))); err != nil {
			t.Fatal(err)
		}
		if !lostWithin(hs[victim], 2*time.Second) {
			t.Fatalf("round %d: no loss 2s after the key was deleted", round)
		}
		time.Sleep(20 * time.Millisecond) // room for a wrong loss to fire
		for i, s := range ss {
			err := s.Release(ctx, 1)
			switch {
			case i == victim && !errors.Is(err, baton.ErrLost):
				t.Errorf("round %d: Release of the deleted hold: %v, want ErrLost", round, err)
			case i != victim && err != nil:
				t.Errorf("round %d: Release of a neighbour of the deleted hold: %v", round, err)
			}
		}
	}
}

// Goroutines on names of their own, one Backend: each sees its own
// deletes and no one else's.
func testHoldWatchManyNames(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, d := fast(t, c, "hwnames")
	other := c.client(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("n%d", g)
			m, err := b.Mutex(ctx, name)
			if err != nil {
				t.Error(err)
				return
			}
			defer m.Close()
			dir := d.dir(baton.KindMutex, name) + "q/"
			for i := range 40 {
				h, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if (i+g)%7 == 0 {
					resp, err := other.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
					if err != nil || len(resp.Kvs) != 1 {
						t.Errorf("%s: keys %v, %v", name, resp, err)
						return
					}
					if _, err := other.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
						t.Error(err)
						return
					}
					if !lostWithin(h, 2*time.Second) {
						t.Errorf("%s hold %d: no loss 2s after its key was deleted", name, i)
					}
					_ = m.Unlock(ctx)
					continue
				}
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("%s hold %d: Unlock: %v (a loss not its own?)", name, i, err)
				}
			}
		}()
	}
	wg.Wait()
}

// A watch that broke is set up again; a hold whose key was deleted
// meanwhile (the history compacted, so that no watch could resume from
// before the delete) still loses, and so does a hold taken after.
func testHoldWatchBroken(t *testing.T, c *cluster) {
	ctx := context.Background()
	b, d := fast(t, c, "hwbroken")
	other := c.client(t)
	s := must(b.Semaphore(ctx, "s", 2)).get(t)
	s2 := must(b.Semaphore(ctx, "s", 2)).get(t)
	dir := d.dir(baton.KindSemaphore, "s") + "q/"
	for round := range 6 {
		h := must(s.Acquire(ctx, 1)).get(t)
		dw := dirWatchOf(d, dir)
		if dw == nil {
			t.Fatal("no watch of the hold's directory")
		}
		breakWatch(t, dw)
		time.Sleep(time.Duration(round%3) * 20 * time.Millisecond)
		resp, err := other.Delete(ctx, keyOf(t, other, dir, int64(h.Token())))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Compact(ctx, resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
		if !lostWithin(h, 2*time.Second) {
			t.Fatalf("round %d: no loss 2s after the key was deleted while the watch was down", round)
		}
		if err := s.Release(ctx, 1); !errors.Is(err, baton.ErrLost) {
			t.Fatalf("round %d: Release: %v, want ErrLost", round, err)
		}
		h2 := must(s2.Acquire(ctx, 1)).get(t)
		if _, err := other.Delete(ctx, keyOf(t, other, dir, int64(h2.Token()))); err != nil {
			t.Fatal(err)
		}
		if !lostWithin(h2, 2*time.Second) {
			t.Fatalf("round %d: no loss of a hold taken after the break", round)
		}
		if err := s2.Release(ctx, 1); !errors.Is(err, baton.ErrLost) {
			t.Fatalf("round %d: Release: %v, want ErrLost", round, err)
		}
	}
}

// A hold that enters the watch after the watch has passed its key's
// delete (the grant and its entry are not one step) loses at once; so
// does one older than what the watch remembers.
func testHoldWatchLateEntry(t *testing.T, c *cluster) {
	ctx := context.Background()
	// A lease that outlives a loaded machine's pauses: the watch is the
	// session's, and a session lost midway would take it.
	b, d := withTTL(t, c, "hwlate", 30*time.Second)
	s := must(b.Semaphore(ctx, "s", 2)).get(t)
	must(s.Acquire(ctx, 1)).get(t) // keeps the watch up and the session open
	defer s.Release(ctx, 1)
	sess := d.cur.Load()
	dir := d.dir(baton.KindSemaphore, "s") + "q/"
	dw := dirWatchOf(d, dir)
	for i := range 20 {
		k := fmt.Sprintf("%slate-%d", dir, i)
		put, err := d.c.Put(ctx, k, "", clientv3.WithLease(sess.id))
		if err != nil {
			t.Fatal(err)
		}
		del, err := d.c.Delete(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		// Wait until the watch has gone past the delete: seen it, or been
		// set up again after it (a watch that breaks is), which makes the
		// entry read the key. The deadline is for a loaded machine: how
		// soon the watch sees a delete is not what is tested here.
		for deadline := time.Now().Add(10 * time.Second); ; {
			dw.mu.Lock()
			seen := dw.deleted[k] == del.Header.Revision || dw.floor >= del.Header.Revision
			dw.mu.Unlock()
			if seen {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the watch did not see the delete")
			}
			time.Sleep(time.Millisecond)
		}
		if i%2 == 1 { // forgotten: the key is read instead
			dw.mu.Lock()
			clear(dw.deleted)
			dw.floor = del.Header.Revision
			dw.mu.Unlock()
		}
		loss := driver.NewLoss()
		hw := d.watchHold(sess, k, put.Header.Revision, loss)
		select {
		case <-loss.Done():
		case <-time.After(2 * time.Second):
			t.Fatalf("entry %d: no loss for a key deleted before the entry", i)
		}
		hw.release()
	}
}
