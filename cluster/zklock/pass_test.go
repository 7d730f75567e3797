package zklock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/locktest"
	"github.com/go-zookeeper/zk"
)

// passDrivers dials url without the core and opens n Mutex drivers of name.
func passDrivers(t *testing.T, url, name string, n int) (*backend, []driver.Lock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ls := make([]driver.Lock, n)
	for i := range ls {
		if ls[i], err = b.OpenMutex(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	return b, ls
}

// TestPassDriver: a hold is passed round three handles of one backend with
// a token one above the previous each time, starting from the node's
// creation zxid scaled by passBits, at most maxPasses times; the grant
// passed is released by another handle's driver, after which another
// client takes the lock at once with a higher token. The Loss of a grant
// passed on never fires.
func TestPassDriver(t *testing.T) {
	addr := standalone(t)
	name := fmt.Sprintf("pass-%d", time.Now().UnixNano())
	b, ls := passDrivers(t, "zk://"+addr+"/pass", name, 3)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	lg := g.Data.(*lockGrant)
	_, st, err := b.c.Get(lg.n.path)
	if err != nil {
		t.Fatal(err)
	}
	if g.Token != uint64(st.Czxid)<<passBits {
		t.Fatalf("token %#x of a node created in zxid %#x, want %#x", g.Token, st.Czxid, uint64(st.Czxid)<<passBits)
	}
	first := g
	var old []driver.Grant
	for i := 1; i <= maxPasses; i++ {
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
		t.Fatalf("pass %d accepted: a node has room for %d", maxPasses+1, maxPasses)
	}
	// The last grant was passed by ls[15%3 = 0]; ls[2] releases it.
	if err := ls[2].Release(ctx, g); err != nil {
		t.Fatalf("Release by another handle: %v", err)
	}
	for _, o := range old {
		if err := o.Loss.Err(); err != nil {
			t.Fatalf("the Loss of a grant passed on fired: %v", err)
		}
	}
	other := open(t, "zk://"+addr+"/pass")
	m, err := other.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
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

// TestPassRefused: a hold whose heartbeats are late is not passed, nor is a
// hold whose epoch ended; the grant stays the giver's, lost or not.
func TestPassRefused(t *testing.T) {
	addr := standalone(t)
	name := fmt.Sprintf("pass-ref-%d", time.Now().UnixNano())
	b, ls := passDrivers(t, "zk://"+addr+"/pass?ttl=5s", name, 2)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	e := g.Data.(*lockGrant).n.e
	saved := e.s.Deadline()
	e.s.SetDeadline(time.Now().Add(b.passLeft() / 2)) // as if heartbeats were late
	if _, ok := ls[1].(driver.Passer).Pass(g); ok {
		t.Fatal("a hold with heartbeats late was passed")
	}
	e.s.SetDeadline(saved)
	if err := g.Loss.Err(); err != nil {
		t.Fatalf("the refused grant is lost: %v", err)
	}
	ng, ok := ls[1].(driver.Passer).Pass(g)
	if !ok {
		t.Fatal("Pass refused with heartbeats on time")
	}
	e.end(errExpired)
	if err := ng.Loss.Err(); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Loss of the passed grant after the epoch ended: %v, want ErrLost", err)
	}
	if err := g.Loss.Err(); err != nil {
		t.Fatalf("the Loss of the grant passed on fired: %v", err)
	}
	if _, ok := ls[0].(driver.Passer).Pass(ng); ok {
		t.Fatal("a lost hold was passed")
	}
	if err := ls[0].Release(ctx, ng); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Release of the lost hold: %v, want ErrLost", err)
	}
}

// TestPassSessionLoss: a passed hold lives as long as the session's
// heartbeats are answered (several session timeouts), and when the client
// is cut off its Loss fires, not that of the grant passed from, before
// another client is granted the lock once the session expired; that
// client's token is above the passed one.
func TestPassSessionLoss(t *testing.T) {
	addr := standalone(t)
	p := startProxy(t, addr)
	const ttl = time.Second
	name := fmt.Sprintf("pass-loss-%d", time.Now().UnixNano())
	_, ls := passDrivers(t, fmt.Sprintf("zk://%s/pass?ttl=%v", p.addr, ttl), name, 2)
	ctx := context.Background()
	g, err := ls[0].Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	ng, ok := ls[0].(driver.Passer).Pass(g)
	if !ok {
		t.Fatal("Pass refused")
	}
	time.Sleep(3 * ttl)
	if err := ng.Loss.Err(); err != nil {
		t.Fatalf("the passed hold was lost with the session alive: %v", err)
	}
	other := open(t, "zk://"+addr+"/pass?ttl=5s")
	m, err := other.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	res := make(chan error, 1)
	var h baton.Hold
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var err error
		h, err = m.Lock(wctx)
		res <- err
	}()
	time.Sleep(100 * time.Millisecond)
	p.cut.Store(true)
	select {
	case <-ng.Loss.Done():
	case <-time.After(5 * ttl):
		t.Fatal("the passed hold's Loss did not fire with the client cut off")
	}
	var lostFirst bool
	select {
	case <-res:
	default:
		lostFirst = true
	}
	if !lostFirst {
		t.Fatal("the other client was granted before the passed hold's Loss fired")
	}
	if err := g.Loss.Err(); err != nil {
		t.Errorf("the Loss of the grant passed on fired: %v", err)
	}
	if err := <-res; err != nil {
		t.Fatalf("the other client's Lock after the session expired: %v", err)
	}
	if uint64(h.Token()) <= ng.Token {
		t.Errorf("token %d after passed token %d", h.Token(), ng.Token)
	}
	if err := ls[1].Release(ctx, ng); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Release of the lost hold: %v, want ErrLost", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestLocalPass: two backends with four handles each hammer one Mutex
// (locktest.PassHammer: a hold passed has pass bits in its token), and the
// server saw fewer acquisitions than there were holds.
func TestLocalPass(t *testing.T) {
	addr := standalone(t)
	url := "zk://" + addr + "/pass?ttl=5s"
	name := fmt.Sprintf("pass-hammer-%d", time.Now().UnixNano())
	bs := [2]baton.Backend{open(t, url), open(t, url)}
	// A node beside the queue keeps the name's directory, and so the
	// queue, from going when the name is free (remove): the queue's
	// version then counts every acquisition of the run.
	zc := connect(t, []string{addr}, 5*time.Second)
	for _, p := range []string{"/pass", "/pass/mutex", "/pass/mutex/" + name, "/pass/mutex/" + name + "/keep"} {
		if _, err := zc.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	count := locktest.PassHammer(t, bs, name, 2*time.Second, func(tok baton.Token) bool { return tok&maxPasses != 0 })
	// Every node created in the queue also wrote the queue's data: its
	// version counts the acquisitions the server saw.
	_, st, err := zc.Get("/pass/mutex/" + name + "/q")
	if err != nil {
		t.Fatal(err)
	}
	if int(st.Version) >= count[0]+count[1] {
		t.Errorf("the server saw %d acquisitions for %d holds: no hold was passed", st.Version, count[0]+count[1])
	}
}
