package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

const testTTL = 2 * time.Second

var nameSeq atomic.Int64

func testName(t *testing.T) string {
	return fmt.Sprintf("f-%d-%s", nameSeq.Add(1), t.Name())
}

func openT(t *testing.T, url string) baton.Backend {
	t.Helper()
	b, err := OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// holderConn returns the id of the session that holds the user-level lock
// of Mutex name, or 0.
func holderConn(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	b := &backend{c: lease.Config{Prefix: DefaultPrefix}}
	var id sql.NullInt64
	if err := db.QueryRow(`SELECT IS_USED_LOCK(?)`, b.userLock(key('m', name))).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}

// watchGrant locks m in the background and reports, at the moment of the
// grant, whether the other hold was still trusted then (a double grant).
type grantWatch struct {
	done   chan struct{}
	hold   baton.Hold
	err    error
	double bool
}

func watchGrant(m baton.Mutex, other *baton.Hold, otherFree *atomic.Bool) *grantWatch {
	w := &grantWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.hold, w.err = m.Lock(context.Background())
		if w.err == nil && !otherFree.Load() && other.Err() == nil {
			w.double = true
		}
	}()
	return w
}

// TestKillHolderConnection: the holder's connection is killed on the
// server, which drops its user-level lock. The lease row still names the
// holder, which renews it through the pool: no one else is granted the
// lock until the holder unlocks, and the holder's hold is not lost.
func TestKillHolderConnection(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	admin := s.admin(t)
	ctx := context.Background()
	name := testName(t)
	a, b := openT(t, s.url(testQuery)), openT(t, s.url(testQuery))
	ma, _ := a.Mutex(ctx, name)
	mb, _ := b.Mutex(ctx, name)
	h, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := holderConn(t, admin, name)
	if id == 0 {
		t.Fatal("the holder's session holds no user-level lock")
	}
	if _, err := admin.Exec(fmt.Sprintf("KILL %d", id)); err != nil {
		t.Fatal(err)
	}
	var free atomic.Bool
	w := watchGrant(mb, &h, &free)
	select {
	case <-w.done:
		t.Fatalf("granted to another client (err %v) while the holder's lease was renewed", w.err)
	case <-time.After(2 * testTTL):
	}
	if err := h.Err(); err != nil {
		t.Fatalf("the hold was lost after its connection was killed: %v", err)
	}
	free.Store(true)
	if err := ma.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the connection was killed: %v", err)
	}
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the lock after Unlock")
	}
	if w.err != nil || w.double {
		t.Fatalf("waiter: err %v, double grant %v", w.err, w.double)
	}
	if w.hold.Token() <= h.Token() {
		t.Fatalf("token %d after %d", w.hold.Token(), h.Token())
	}
	mb.Unlock(ctx)
}

// TestServerRestart: the server is killed and started again while a
// client holds and another waits. Whatever the holder's lease does (renewed
// after the restart, or lost), the waiter is never granted the lock while
// the holder still trusts its hold, and tokens keep increasing: the lock
// row and its counter are committed data.
func TestServerRestart(t *testing.T) {
	s := startServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	name := testName(t)
	a, b := openT(t, s.url(testQuery)), openT(t, s.url(testQuery))
	ma, _ := a.Mutex(ctx, name)
	mb, _ := b.Mutex(ctx, name)
	var last baton.Token
	for round := range 2 {
		h, err := ma.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Token() <= last {
			t.Fatalf("round %d: token %d after %d", round, h.Token(), last)
		}
		var free atomic.Bool
		w := watchGrant(mb, &h, &free)
		time.Sleep(50 * time.Millisecond)
		s.restart()
		time.Sleep(testTTL)
		t.Logf("round %d: hold after the restart: %v", round, h.Err())
		if h.Err() == nil {
			free.Store(true)
			if err := ma.Unlock(ctx); err != nil && !errors.Is(err, baton.ErrLost) {
				t.Fatalf("round %d: Unlock: %v", round, err)
			}
		} else {
			free.Store(true)
			if err := ma.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
				t.Fatalf("round %d: Unlock of a lost hold: %v, want ErrLost", round, err)
			}
		}
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiter did not get the lock after the restart", round)
		}
		if w.err != nil || w.double {
			t.Fatalf("round %d: waiter: err %v, double grant %v", round, w.err, w.double)
		}
		if w.hold.Token() <= h.Token() {
			t.Fatalf("round %d: token %d after %d", round, w.hold.Token(), h.Token())
		}
		last = w.hold.Token()
		if err := mb.Unlock(ctx); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
	}
}

// TestServerRestartSemaphore: a Semaphore waiter keeps waiting through a
// server restart, and is served when the holder, reconnected, releases.
func TestServerRestartSemaphore(t *testing.T) {
	s := startServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	name := testName(t)
	a, b := openT(t, s.url(testQuery)), openT(t, s.url(testQuery))
	sa, _ := a.Semaphore(ctx, name, 1)
	sb, _ := b.Semaphore(ctx, name, 1)
	h, err := sa.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := sb.Acquire(ctx, 1); got <- err }()
	time.Sleep(50 * time.Millisecond)
	s.restart()
	select {
	case err := <-got:
		t.Fatalf("the waiter returned (%v) while the permit was held", err)
	case <-time.After(testTTL / 2):
	}
	if err := h.Err(); err != nil {
		t.Fatalf("hold lost across a short restart: %v", err)
	}
	if err := sa.Release(ctx, 1); err != nil {
		t.Fatalf("Release after the restart: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter after the restart: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not served after the restart")
	}
	if err := sb.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// TestPartitionedHolder: the holder's network goes silent (a proxy stops
// forwarding, keeping both TCP connections open, as a partition or a
// paused client looks to the server). The holder's Loss fires before the
// other client is granted the lock, and the server ends the holder's idle
// session by itself (wait_timeout), which gives its user-level lock back.
func TestPartitionedHolder(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	admin := s.admin(t)
	ctx := context.Background()
	name := testName(t)
	p := startProxy(t, s.addr())
	a := openT(t, "mysql://root@"+p.addr()+"/baton?"+testQuery)
	b := openT(t, s.url(testQuery))
	ma, _ := a.Mutex(ctx, name)
	mb, _ := b.Mutex(ctx, name)
	h, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := holderConn(t, admin, name)
	if id == 0 {
		t.Fatal("the holder's session holds no user-level lock")
	}
	frozen := time.Now()
	p.freeze()
	var free atomic.Bool
	w := watchGrant(mb, &h, &free)
	select {
	case <-w.done:
	case <-time.After(4 * testTTL):
		t.Fatal("the waiter was not granted the lock of a partitioned holder")
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	if w.double {
		t.Fatal("granted to another client while the partitioned holder still trusted its hold")
	}
	select {
	case <-h.Lost():
	default:
		t.Fatal("Lost() not closed once another client holds")
	}
	if waited := time.Since(frozen); waited < testTTL-testTTL/10 {
		t.Fatalf("granted %v after the partition, before the holder's lease ran out", waited)
	}
	// The server ended the silent session on its own.
	deadline := frozen.Add(testTTL + 3*time.Second)
	for {
		var n int
		if err := admin.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Logf("session %d ended by the server %v after the partition", id, time.Since(frozen).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server kept the silent session %d for %v", id, time.Since(frozen))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if w.hold.Token() <= h.Token() {
		t.Fatalf("token %d after %d", w.hold.Token(), h.Token())
	}
	p.close()
	if err := ma.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock of the partitioned holder: %v, want ErrLost", err)
	}
	if err := mb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestContextEndsMidQuery: go-sql-driver closes a connection when a
// context ends during a query, which ends every lock of its session. A
// waiter's context ending must not touch another handle's hold, and an
// Unlock whose context ends during the statement still leaves the lock
// either free or held, never half-released.
func TestContextEndsMidQuery(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	admin := s.admin(t)
	ctx := context.Background()
	name := testName(t)
	a, b := openT(t, s.url(testQuery)), openT(t, s.url(testQuery))
	m1, _ := a.Mutex(ctx, name)
	m2, _ := a.Mutex(ctx, name)
	other, _ := b.Mutex(ctx, name)
	for round := range 20 {
		// A cancelled waiter's session may still be granted the user-level
		// lock by an Unlock before the server notices its client is gone;
		// it lets go at once. Wait for that, so that m1 takes it.
		for deadline := time.Now().Add(5 * time.Second); holderConn(t, admin, name) != 0; {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the user-level lock stays taken with nobody holding", round)
			}
			time.Sleep(time.Millisecond)
		}
		h, err := m1.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := holderConn(t, admin, name)
		if id == 0 {
			t.Fatalf("round %d: the holder took no user-level lock", round)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Duration(1+round)*time.Millisecond)
		_, err = m2.Lock(wctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("round %d: waiter: %v", round, err)
		}
		if got := holderConn(t, admin, name); got != id || h.Err() != nil {
			t.Fatalf("round %d: after a waiter's context ended: user-level lock of session %d (was %d), hold err %v", round, got, id, h.Err())
		}
		if _, err := other.TryLock(ctx); !errors.Is(err, baton.ErrLocked) {
			t.Fatalf("round %d: TryLock of another client while held: %v", round, err)
		}
		uctx, cancel := context.WithTimeout(ctx, time.Duration(round*50)*time.Microsecond)
		err = m1.Unlock(uctx)
		cancel()
		_, terr := other.TryLock(ctx)
		switch {
		case err == nil && terr != nil:
			t.Fatalf("round %d: Unlock returned nil but the lock is not free: %v", round, terr)
		case err != nil && terr == nil:
			t.Fatalf("round %d: Unlock failed (%v) but the lock was released", round, err)
		case err != nil:
			if err := m1.Unlock(ctx); err != nil {
				t.Fatalf("round %d: Unlock again: %v", round, err)
			}
			if _, err := other.TryLock(ctx); err != nil {
				t.Fatalf("round %d: TryLock after Unlock: %v", round, err)
			}
		}
		if err := other.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// proxy forwards TCP connections to a server until frozen.
type proxy struct {
	t      *testing.T
	l      net.Listener
	to     string
	mu     sync.Mutex
	conns  []net.Conn
	frozen chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, to string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, l: l, to: to, frozen: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

// pipe copies until the proxy is frozen; then it stops reading, so the
// peers see a silent connection.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			return // drops what it read; the connections stay open
		default:
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

func (p *proxy) freeze() { close(p.frozen) }

func (p *proxy) close() {
	p.once.Do(func() {
		p.l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}
