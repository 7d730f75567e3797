package pglock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/locktest"
)

// passDrivers returns a driver backend and n Mutex drivers of name.
func passDrivers(t *testing.T, name string, n int) []driver.Lock {
	t.Helper()
	o, err := buildOptions([]lease.Option{lease.WithTTL(faultTTL)})
	if err != nil {
		t.Fatal(err)
	}
	d := newBackend(poolT(t), false, o)
	t.Cleanup(func() { d.Close() })
	ls := make([]driver.Lock, n)
	for i := range ls {
		if ls[i], err = d.OpenMutex(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	return ls
}

// TestPassDriver: a hold is passed round three handles of one backend with
// a token one above the previous each time, at most passTokens times; the
// grant passed is released by another handle's driver, after which another
// client takes the lock at once with a token above the passed ones. The
// Loss of a grant passed on never fires.
func TestPassDriver(t *testing.T) {
	name := fmt.Sprintf("pass-%d", time.Now().UnixNano())
	ls := passDrivers(t, name, 3)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	first := g
	var old []driver.Grant
	for i := 1; i <= passTokens; i++ {
		ng, ok := ls[i%3].(driver.Passer).Pass(g)
		if !ok {
			t.Fatalf("pass %d refused", i)
		}
		if ng.Token != first.Token+uint64(i) || ng.Loss == g.Loss {
			t.Fatalf("pass %d: token %d (first %d), same Loss %v", i, ng.Token, first.Token, ng.Loss == g.Loss)
		}
		old, g = append(old, g), ng
	}
	if _, ok := ls[0].(driver.Passer).Pass(g); ok {
		t.Fatalf("pass %d accepted: the row reserves %d tokens", passTokens+1, passTokens)
	}
	if err := ls[2].Release(ctx, g); err != nil {
		t.Fatalf("Release by another handle: %v", err)
	}
	for _, o := range old {
		if err := o.Loss.Err(); err != nil {
			t.Fatalf("the Loss of a grant passed on fired: %v", err)
		}
	}
	m := mutexT(t, openT(t, need(t)), name)
	h, err := m.TryLock(ctx)
	if err != nil {
		t.Fatalf("another client after the release: %v", err)
	}
	if uint64(h.Token()) <= g.Token {
		t.Fatalf("token %d after passed token %d", h.Token(), g.Token)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPassLoss: when the holding session is ended after a pass, the Loss
// of the grant passed to fires, not that of the grant passed from, and a
// lost hold is not passed.
func TestPassLoss(t *testing.T) {
	name := fmt.Sprintf("pass-loss-%d", time.Now().UnixNano())
	ls := passDrivers(t, name, 2)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ng, ok := ls[0].(driver.Passer).Pass(g)
	if !ok {
		t.Fatal("Pass refused")
	}
	admin(t, "SELECT pg_terminate_backend($1)", int(ng.Data.(*hold).c.Conn().PgConn().PID()))
	select {
	case <-ng.Loss.Done():
	case <-time.After(2 * faultTTL):
		t.Fatal("the Loss of the grant passed to did not fire")
	}
	if !errors.Is(ng.Loss.Err(), baton.ErrLost) || g.Loss.Err() != nil {
		t.Fatalf("losses: passed to %v, passed from %v", ng.Loss.Err(), g.Loss.Err())
	}
	if _, ok := ls[1].(driver.Passer).Pass(ng); ok {
		t.Fatal("a lost hold was passed")
	}
	if err := ls[1].Release(ctx, ng); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Release of the lost hold: %v, want ErrLost", err)
	}
}

// TestLocalPass: two backends with four handles each hammer one Mutex
// (locktest.PassHammer: the counter row starts at 1 and moves by
// passTokens+1, so a hold passed has a token that is not 1 above a
// multiple of it).
func TestLocalPass(t *testing.T) {
	url := need(t)
	name := fmt.Sprintf("pass-hammer-%d", time.Now().UnixNano())
	bs := [2]baton.Backend{openT(t, url), openT(t, url)}
	locktest.PassHammer(t, bs, name, 2*time.Second, func(tok baton.Token) bool { return (tok-1)%(passTokens+1) != 0 })
}
