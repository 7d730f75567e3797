package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestReleasedNotWaited: after a release, a holder on another Backend is
// granted at once, whatever the released hold was (a write lock, a read
// lock, a write lock downgraded): only a session that ended holding makes
// the next holder wait.
func TestReleasedNotWaited(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	rw := func(b baton.Backend) baton.RWMutex {
		m, err := b.RWMutex(ctx, "released-not-waited")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	a, b := rw(openT(t, url)), rw(openT(t, url))
	m1, m2 := mutexT(t, openT(t, url), "released-not-waited"), mutexT(t, openT(t, url), "released-not-waited")
	prompt := func(what string, lock func() error) {
		t.Helper()
		start := time.Now()
		if err := lock(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d := time.Since(start); d > faultTTL/2 {
			t.Errorf("%s waited %v after a release", what, d)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		_, err := m1.Lock(ctx)
		must(err)
		must(m1.Unlock(ctx))
		prompt("Mutex Lock", func() error { _, err := m2.Lock(ctx); return err })
		must(m2.Unlock(ctx))
	}
	_, err := a.Lock(ctx)
	must(err)
	must(a.Unlock(ctx))
	prompt("RLock after a write lock", func() error { _, err := b.RLock(ctx); return err })
	must(b.RUnlock(ctx))
	prompt("Lock after a read lock", func() error { _, err := a.Lock(ctx); return err })
	_, err = a.Downgrade(ctx)
	must(err)
	must(a.RUnlock(ctx))
	prompt("Lock after a downgraded lock", func() error { _, err := b.Lock(ctx); return err })
	must(b.Unlock(ctx))
}

// TestTerminatedAfterHandoff: a waiter queued behind another waiter is
// granted the lock when the session of the one before it, granted in the
// meantime, is terminated. The record of that holder's lease was written
// after the second waiter's statement began, so the second waiter must read
// it as of its grant, not as of its statement's start; its Lock returns
// only once the terminated holder's Loss has fired.
func TestTerminatedAfterHandoff(t *testing.T) {
	url := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const name = "terminated-after-handoff"
	q, s, a := mutexT(t, openT(t, url), name), mutexT(t, openT(t, url), name), mutexT(t, openT(t, url), name)
	if _, err := q.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiters := func(n int) {
		t.Helper()
		c, ac := adminConn(t)
		for {
			var w int
			if err := ac.QueryRow(c, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
	AND classid::bigint = ($1::bigint >> 32) & 4294967295 AND objid::bigint = $1::bigint & 4294967295`, advisoryKey(baton.KindMutex, name)).Scan(&w); err != nil {
				t.Fatal(err)
			}
			if w >= n {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	type result struct {
		h   baton.Hold
		err error
	}
	lock := func(m baton.Mutex) chan result {
		ch := make(chan result, 1)
		go func() {
			h, err := m.Lock(ctx)
			ch <- result{h, err}
		}()
		return ch
	}
	sc := lock(s)
	waiters(1)
	ac := lock(a)
	waiters(2)
	if err := q.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	sr := <-sc
	if sr.err != nil {
		t.Fatal(sr.err)
	}
	terminateHolder(t, baton.KindMutex, name)
	ar := <-ac
	if ar.err != nil {
		t.Fatal(ar.err)
	}
	select {
	case <-sr.h.Lost():
	default:
		t.Fatal("the second waiter holds the lock while the terminated holder's Loss has not fired")
	}
	if ar.h.Token() <= sr.h.Token() {
		t.Errorf("token %d after %d", ar.h.Token(), sr.h.Token())
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
