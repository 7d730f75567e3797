package mysqllock

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestIdleWaitsAreQuiet: waiters of every kind behind live holders (a
// Mutex, an RWMutex reader and writer, a Semaphore, a Cond, a Value) send
// the server a few statements per renewal period, not a poll every few
// milliseconds; and each wakes, when the holder lets go, well before its
// sleep's slice would end (a ring, not the clock).
func TestIdleWaitsAreQuiet(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := t.Context()
	const ttl = 10 * time.Second // slices of a renewal period, ~3.3 s
	hb := openT(t, s.url("ttl=10s"))
	wb := openT(t, s.url("ttl=10s"))
	admin := s.admin(t)
	name := testName(t)

	m, err := hb.Mutex(ctx, name)
	ok(t, err)
	_, err = m.Lock(ctx)
	ok(t, err)
	rw, err := hb.RWMutex(ctx, name)
	ok(t, err)
	_, err = rw.Lock(ctx)
	ok(t, err)
	sem, err := hb.Semaphore(ctx, name, 1)
	ok(t, err)
	_, err = sem.Acquire(ctx, 1)
	ok(t, err)
	val, err := hb.Value(ctx, name)
	ok(t, err)
	ver, err := val.CompareAndSwap(ctx, 0, []byte("a"))
	ok(t, err)
	cond, err := hb.Cond(ctx, name)
	ok(t, err)

	type waiter struct {
		what string
		done chan error
	}
	var ws []waiter
	wait := func(what string, f func() error) {
		w := waiter{what, make(chan error, 1)}
		ws = append(ws, w)
		go func() { w.done <- f() }()
	}
	wm, _ := wb.Mutex(ctx, name)
	wait("Mutex", func() error { return then(wm.Lock(ctx))(wm.Unlock) })
	wr, _ := wb.RWMutex(ctx, name)
	wait("RWMutex reader", func() error { return then(wr.RLock(ctx))(wr.RUnlock) })
	ww, _ := wb.RWMutex(ctx, name)
	wait("RWMutex writer", func() error { return then(ww.Lock(ctx))(ww.Unlock) })
	wsem, _ := wb.Semaphore(ctx, name, 1)
	wait("Semaphore", func() error {
		return then(wsem.Acquire(ctx, 1))(func(ctx context.Context) error { return wsem.Release(ctx, 1) })
	})
	wval, _ := wb.Value(ctx, name)
	wait("Value", func() error { _, _, err := wval.Wait(ctx, ver); return err })
	wcond, _ := wb.Cond(ctx, name)
	cm, _ := wb.Mutex(ctx, name+"/cond")
	_, err = cm.Lock(ctx)
	ok(t, err)
	wait("Cond", func() error {
		if err := wcond.Wait(ctx, cm); err != nil {
			return err
		}
		return cm.Unlock(ctx)
	})

	time.Sleep(time.Second) // every waiter is asleep
	for _, w := range ws {
		select {
		case err := <-w.done:
			t.Fatalf("%s did not wait: %v", w.what, err)
		default:
		}
	}
	const window = 4 * time.Second
	q0 := questions(t, admin)
	time.Sleep(window)
	got := int64(questions(t, admin) - q0)
	// A sleeping waiter costs an attempt (up to 9 statements) and a sleep
	// per slice; a holder, a renewal per period; the count itself, 2.
	renew := ttl / 3
	slices := int64(window/renew) + 1
	limit := int64(len(ws))*10*slices + 3*slices + 10
	t.Logf("%d statements in %v with %d waiters and 3 holds (limit %d)", got, window, len(ws), limit)
	if got > limit {
		t.Fatalf("%d statements in %v: waiters poll (limit %d)", got, window, limit)
	}

	// Each wakes by a ring, well within a slice.
	start := time.Now()
	ok(t, m.Unlock(ctx))
	ok(t, rw.Unlock(ctx))
	ok(t, sem.Release(ctx, 1))
	_, err = val.CompareAndSwap(ctx, ver, []byte("b"))
	ok(t, err)
	ok(t, cond.Signal(ctx))
	for _, w := range ws {
		select {
		case err := <-w.done:
			if err != nil {
				t.Fatalf("%s: %v", w.what, err)
			}
		case <-time.After(renew - 500*time.Millisecond - time.Since(start)):
			t.Fatalf("%s still waits %v after the release: it was not woken", w.what, time.Since(start))
		}
	}
	t.Logf("all woken in %v", time.Since(start))
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// then gives back what an acquisition that succeeded took.
func then(_ baton.Hold, err error) func(func(context.Context) error) error {
	return func(release func(context.Context) error) error {
		if err != nil {
			return err
		}
		return release(context.Background())
	}
}

// TestIdleSleepersBounded: after a burst of sleeping waiters, a Backend
// keeps a few sleeper connections, not one per waiter of the burst.
func TestIdleSleepersBounded(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := t.Context()
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton")
	ok(t, err)
	defer db.Close()
	d, err := newBackend(ctx, db, nil, false)
	ok(t, err)
	defer d.Close()
	var sls []*sleeper
	for range 3 * maxIdleSleepers {
		sl, err := d.getSleeper(ctx)
		ok(t, err)
		sls = append(sls, sl)
	}
	for _, sl := range sls {
		d.putSleeper(sl, true)
	}
	if n := len(d.bell.idle); n != maxIdleSleepers {
		t.Fatalf("%d idle sleepers kept after a burst of %d, want %d", n, len(sls), maxIdleSleepers)
	}
	if open := db.Stats().OpenConnections; open > maxIdleSleepers+2 {
		t.Fatalf("%d connections open after the burst, want about %d", open, maxIdleSleepers)
	}
}

// TestCloseEndsSleeps: when a Backend's Close returns, no statement of its
// waiters sleeps on, also when the database handle is the caller's and
// stays open; before, a sleep could outlive the Backend by its slice (a
// TTL).
func TestCloseEndsSleeps(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := t.Context()
	admin := s.admin(t)
	hb := openT(t, s.url("ttl=10s"))
	name := testName(t)
	rw, err := hb.RWMutex(ctx, name)
	ok(t, err)
	_, err = rw.Lock(ctx)
	ok(t, err)
	v, err := hb.Value(ctx, name)
	ok(t, err)
	ver, err := v.CompareAndSwap(ctx, 0, []byte("a"))
	ok(t, err)
	for _, own := range []bool{true, false} {
		db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton")
		ok(t, err)
		defer db.Close()
		d, err := newBackend(ctx, db, nil, own)
		ok(t, err)
		b := baton.NewBackend(d)
		done := make(chan error, 2)
		wr, err := b.RWMutex(ctx, name)
		ok(t, err)
		go func() { _, err := wr.RLock(ctx); done <- err }()
		wv, err := b.Value(ctx, name)
		ok(t, err)
		go func() { _, _, err := wv.Wait(ctx, ver); done <- err }()
		waitFor(t, "two sleeping statements", func() bool { return sleeping(t, admin) >= 2 })
		ok(t, b.Close())
		if n := sleeping(t, admin); n != 0 {
			t.Errorf("own db %v: %d statements still sleep after Close returned", own, n)
		}
		for range 2 {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("own db %v: a wait did not end with Close", own)
			}
		}
	}
}

// sleeping counts the statements that sleep under a mark.
func sleeping(t *testing.T, admin *sql.DB) int {
	t.Helper()
	var n int
	ok(t, admin.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND INFO LIKE 'SELECT ''baton-wait%'`).Scan(&n))
	return n
}

// waitFor waits up to 3 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("no %s in 3 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
