package zklock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

func TestPartitionStandalone(t *testing.T) {
	a := standalone(t)
	testPartition(t, a, "zk://"+a+"/partition")
}

// testPartition cuts a holder and a waiter off from the servers past their
// session timeout: the holder's Lost fires at least a tenth of the session
// timeout (the margin, marginDivisor) before the other client is granted,
// the waiter gets ErrLost, and the cut-off client works again once the
// partition heals.
func testPartition(t *testing.T, server, direct string) {
	p := startProxy(t, server)
	ttl := 2 * time.Second
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	raw, err := dial(dctx, fmt.Sprintf("zk://%s/partition?ttl=%v", p.addr, ttl), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := baton.NewBackend(raw)
	t.Cleanup(func() { _ = a.Close() })
	b := open(t, direct+"?ttl=5s") // not cut off: a long timeout rides out a loaded machine
	ctx := context.Background()
	name := fmt.Sprintf("p-%d", time.Now().UnixNano())
	ma, err := a.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()
	// The cut-off waiter is of another Backend: one of a's own would wait
	// in the process (the pass line) for ma's Unlock, not on the server.
	a2 := open(t, fmt.Sprintf("zk://%s/partition?ttl=%v", p.addr, ttl))
	ma2, err := a2.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer ma2.Close()
	mb, err := b.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()

	ha, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(m baton.Mutex, res chan<- error, hold *baton.Hold) {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		h, err := m.Lock(wctx)
		if err == nil {
			*hold = h
		}
		res <- err
	}
	var ha2, hb baton.Hold
	ra2, rb := make(chan error, 1), make(chan error, 1)
	go wait(ma2, ra2, &ha2)
	time.Sleep(100 * time.Millisecond) // ma2 queues before mb
	go wait(mb, rb, &hb)
	time.Sleep(100 * time.Millisecond)

	// Cut right after a heartbeat is answered: the server's last word
	// from the holder is then that heartbeat, and its expiry comes as
	// early as it can after the holder's deadline.
	afterHeartbeat(t, raw)
	t0 := time.Now()
	p.cut.Store(true)
	var lostAt time.Duration
	select {
	case <-ha.Lost():
		lostAt = time.Since(t0)
	case <-time.After(5 * ttl):
		t.Fatal("the cut-off holder's Lost() did not fire")
	}
	if err := ha.Err(); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Err of the cut-off hold: %v, want ErrLost", err)
	}
	var grantAt time.Duration
	select {
	case err := <-rb:
		grantAt = time.Since(t0)
		if err != nil {
			t.Fatalf("the other client's Lock: %v", err)
		}
	case <-time.After(10 * ttl):
		t.Fatal("the other client was not granted the lock after the session timeout")
	}
	if hb.Token() <= ha.Token() {
		t.Errorf("token %d after a lost hold's %d", hb.Token(), ha.Token())
	}
	select {
	case err := <-ra2:
		if !errors.Is(err, baton.ErrLost) {
			t.Errorf("the cut-off waiter's Lock: %v, want ErrLost", err)
		}
	case <-time.After(5 * ttl):
		t.Fatal("the cut-off waiter hangs")
	}
	t.Logf("partition: holder lost after %v, other client granted after %v", lostAt.Round(time.Millisecond), grantAt.Round(time.Millisecond))
	if lostAt >= grantAt {
		t.Errorf("Lost fired after the other client's grant")
	}
	// The margin less the drift: what is left for the timer that closes
	// Lost to be late on a loaded machine.
	if margin := ttl / marginDivisor; grantAt-lostAt < margin {
		t.Errorf("Lost fired only %v before the other client's grant, want at least %v", (grantAt - lostAt).Round(time.Millisecond), margin)
	}
	if err := ma.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock of the lost hold: %v, want ErrLost", err)
	}
	if err := mb.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}

	// Healed, the cut-off client gets a new session and locks again.
	p.heal()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := ma.Lock(lctx)
	if err != nil {
		t.Fatalf("Lock after the partition healed: %v", err)
	}
	if h.Token() <= hb.Token() {
		t.Errorf("token %d after %d", h.Token(), hb.Token())
	}
	if err := ma.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// TestLostCreateReply: a waiter whose create was applied but whose reply
// was lost with the connection gives up; its node, found by the id in its
// name once the client is back on the same session, is deleted, and does
// not block the name.
func TestLostCreateReply(t *testing.T) {
	a := standalone(t)
	p := startProxy(t, a)
	ttl := 4 * time.Second // the session outlives the lost connection
	cut := open(t, fmt.Sprintf("zk://%s/lostreply?ttl=%v", p.addr, ttl))
	direct := open(t, fmt.Sprintf("zk://%s/lostreply?ttl=%v", a, ttl))
	ctx := context.Background()
	name := fmt.Sprintf("r-%d", time.Now().UnixNano())
	holder, err := direct.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	other, err := direct.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	waiter, err := cut.Mutex(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	if _, err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Warm the waiter's epoch so that its Lock sends the create at once.
	if _, err := waiter.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock: %v", err)
	}
	c := connect(t, []string{a}, 5*time.Second)
	queue := DefaultPrefix
	if o, err := buildConfig([]lease.Option{lease.WithPrefix("/lostreply")}); err == nil {
		queue = o.Prefix
	}
	queue += "/mutex/" + encodeName(name) + "/q"
	p.mute.Store(true)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = waiter.Lock(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with its reply lost: %v, want DeadlineExceeded", err)
	}
	kids, _, err := c.Children(queue)
	if err != nil || len(kids) != 2 {
		t.Fatalf("queue %v (%v): want the holder's node and the lost create's", kids, err)
	}
	// The client notices the silent connection, reconnects on the same
	// session and sweeps.
	time.Sleep(ttl / 2)
	p.heal()
	deadline := time.Now().Add(3 * ttl)
	for {
		kids, _, err = c.Children(queue)
		if err == nil && len(kids) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lost create's node is still there: %v (%v)", kids, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the sweep: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// afterHeartbeat returns as soon as a heartbeat of b is answered: the
// deadline of its epoch moves.
func afterHeartbeat(t *testing.T, b *backend) {
	t.Helper()
	e := b.cur.Load()
	dl := e.s.Deadline
	from := dl()
	for end := time.Now().Add(10 * b.every()); dl().Equal(from); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no heartbeat answered")
		}
	}
}
