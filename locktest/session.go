package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// SessionKiller ends, on the server, the session that holds the Mutex name
// of the backend at cfg (its connection, its lease), as an operator or the
// server can (pg_terminate_backend, KILL, a revoked lease, an expired
// session), and returns once it has ended. It reports whether the hold
// outlives that session: true for a backend that keeps the hold in a
// record its renewals reach by other connections. The suite then checks
// that the hold is still trusted, and otherwise that it is lost and that
// Unlock says so.
type SessionKiller func(cfg, name string) (survives bool, err error)

// lostBound is how long a hold whose session was ended may stay
// trusted: a renewal that fails must report it well within a lease.
const lostBound = 30 * time.Second

// testSessionKilled: after its session is ended on the server, a hold
// either survives (Unlock succeeds, and nobody else is granted before it)
// or is lost: Unlock right after the end returns an error matching
// ErrLost, with Hold.Err set and Lost closed by then; left alone, the
// hold's Lost closes on its own; another handle is granted only once
// Err is set; and the name can be taken again afterwards.
func testSessionKilled(t *testing.T, e *env) {
	ctx, name, m1, m2 := e.twoMutexes(t)
	for _, unlockAtOnce := range []bool{true, false} {
		h, err := m1.Lock(ctx)
		ok(t, "Lock", err)
		survives, err := e.s.KillSession(e.cfg, name)
		ok(t, "end the session of the hold", err)
		if !survives && !unlockAtOnce {
			select {
			case <-h.Lost():
			case <-time.After(lostBound):
				t.Fatalf("the hold was not reported lost within %v after its session ended", lostBound)
			}
		}
		if h2, err := m2.TryLock(ctx); err == nil {
			if h.Err() == nil {
				t.Errorf("another handle was granted (token %d) while the hold (token %d) was trusted", h2.Token(), h.Token())
			}
			ok(t, "Unlock of the other handle", m2.Unlock(ctx))
		} else {
			is(t, "TryLock by another handle", err, baton.ErrLocked)
		}
		err = m1.Unlock(ctx)
		if survives {
			ok(t, "Unlock of a hold that outlives its session", err)
			if h.Err() != nil {
				t.Errorf("the hold outlives its session, but Err = %v", h.Err())
			}
		} else {
			is(t, "Unlock after the session ended", err, baton.ErrLost)
			if h.Err() == nil {
				t.Error("Unlock reported the loss, but Hold.Err is nil")
			}
			select {
			case <-h.Lost():
			default:
				t.Error("Unlock reported the loss, but Hold.Lost is open")
			}
		}
		// The name is free again, once any lease left behind has run out.
		lctx, cancel := context.WithTimeout(ctx, lostBound)
		_, err = m2.Lock(lctx)
		cancel()
		ok(t, "Lock after the release", err)
		ok(t, "Unlock", m2.Unlock(ctx))
	}
}

// RunSessionKilled runs only the SessionKilled test of s (whose
// KillSession is set) against cfg, for a backend that can end a session
// only on a route of its own to the server (a proxy that sees it begin).
func RunSessionKilled(t *testing.T, s Suite, cfg string) {
	t.Helper()
	if s.KillSession == nil {
		t.Fatal("RunSessionKilled: the suite has no KillSession")
	}
	e := &env{s: s, cfg: cfg}
	e.run(t, []subtest{{"SessionKilled", testSessionKilled, true}}, checkLeaks)
}
