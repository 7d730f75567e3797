package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/locktest"
	_ "github.com/go-sql-driver/mysql"
)

// passDrivers returns n Mutex drivers of name on one driver backend, and
// the database it uses.
func passDrivers(t *testing.T, name string, n int) ([]driver.Lock, *sql.DB) {
	t.Helper()
	s := sharedServer(t)
	createDB(t, s, "baton")
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d, err := newBackend(context.Background(), db, []lease.Option{lease.WithTTL(testTTL)}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ls := make([]driver.Lock, n)
	for i := range ls {
		if ls[i], err = d.OpenMutex(context.Background(), name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ls[i].Close() })
	}
	return ls, db
}

// TestPassDriver: a hold is passed round three handles of one backend with
// a token one above the previous each time, at most passTokens times; the
// grant passed is released by another handle's driver, which frees the
// row and the user-level lock, and another client then takes the lock at
// once with a token above the passed ones. The Loss of a grant passed on
// never fires, and the handle that passed its connection along opens
// another.
func TestPassDriver(t *testing.T) {
	name := testName(t)
	ls, db := passDrivers(t, name, 3)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	first := g
	var old []driver.Grant
	for i := 1; i <= passTokens; i++ {
		ng, ok := ls[(i-1)%3].(driver.Passer).Pass(g)
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
	// ls[0] gave its connection to the hold: it takes another for a try.
	if _, err := ls[0].TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryAcquire while passed: %v, want ErrLocked", err)
	}
	if err := ls[2].Release(ctx, g); err != nil {
		t.Fatalf("Release by another handle: %v", err)
	}
	for _, o := range old {
		if err := o.Loss.Err(); err != nil {
			t.Fatalf("the Loss of a grant passed on fired: %v", err)
		}
	}
	if id := holderConn(t, db, name); id != 0 {
		t.Fatalf("session %d still holds the user-level lock after the release", id)
	}
	m, err := openT(t, sharedServer(t).url(testQuery)).Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
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

// TestPassLoss: when the row is taken from a hold after a pass (as rm
// does), the Loss of the grant passed to fires at its next renewal, not
// that of the grant passed from, and a lost hold is not passed.
func TestPassLoss(t *testing.T) {
	name := testName(t)
	ls, db := passDrivers(t, name, 2)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ng, ok := ls[0].(driver.Passer).Pass(g)
	if !ok {
		t.Fatal("Pass refused")
	}
	if _, err := db.Exec("UPDATE `"+DefaultPrefix+"lock` SET owner = '' WHERE name = ?", key('m', name)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ng.Loss.Done():
	case <-time.After(2 * testTTL):
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
	if id := holderConn(t, db, name); id != 0 {
		t.Fatalf("session %d still holds the user-level lock after the release", id)
	}
}

// TestLocalPass: two backends with four handles each hammer one Mutex
// (locktest.PassHammer: a hold passed has a token that is not a multiple
// of passTokens+1), and nothing is held at the end.
func TestLocalPass(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	name := testName(t)
	bs := [2]baton.Backend{openT(t, s.url(testQuery)), openT(t, s.url(testQuery))}
	locktest.PassHammer(t, bs, name, 2*time.Second, func(tok baton.Token) bool { return tok%(passTokens+1) != 0 })
	if id := holderConn(t, s.admin(t), name); id != 0 {
		t.Errorf("session %d holds the user-level lock at the end", id)
	}
}
