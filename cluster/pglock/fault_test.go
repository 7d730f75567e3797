package pglock

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

const faultTTL = 2 * time.Second

func openT(t *testing.T, url string, opts ...lease.Option) baton.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := OpenURL(ctx, url, append([]lease.Option{lease.WithTTL(faultTTL)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func mutexT(t *testing.T, b baton.Backend, name string) baton.Mutex {
	t.Helper()
	m, err := b.Mutex(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// holderPIDs returns the server pids of the sessions that hold the lock of
// a name of a kind (default prefix).
func holderPIDs(t *testing.T, kind baton.Kind, name string) []int32 {
	t.Helper()
	ctx, c := adminConn(t)
	rows, err := c.Query(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND classid::bigint = ($1::bigint >> 32) & 4294967295 AND objid::bigint = $1::bigint & 4294967295`, advisoryKey(kind, name))
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// sessionAlive reports whether the server still has a session of pid.
func sessionAlive(t *testing.T, pid int32) bool {
	t.Helper()
	ctx, c := adminConn(t)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// terminateHolder ends the session of the one holder of a name: the
// server frees its lock at once.
func terminateHolder(t *testing.T, kind baton.Kind, name string) {
	t.Helper()
	pids := holderPIDs(t, kind, name)
	if len(pids) != 1 {
		t.Fatalf("holders on the server: %v", pids)
	}
	admin(t, "SELECT pg_terminate_backend($1)", pids[0])
}

// afterLoss takes the lock on m2 and checks that h1's Loss fired (before
// the grant when lostFirst) and that the new token is greater.
func afterLoss(t *testing.T, h1 baton.Hold, m2 baton.Mutex, lostFirst bool) baton.Hold {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	h2, err := m2.Lock(ctx)
	if err != nil {
		t.Fatalf("second client: %v", err)
	}
	if lostFirst {
		select {
		case <-h1.Lost():
		default:
			t.Fatal("second client holds the lock while the first holder's Loss has not fired")
		}
	}
	select {
	case <-h1.Lost():
	case <-time.After(faultTTL):
		t.Fatal("the first holder's Loss did not fire")
	}
	if !errors.Is(h1.Err(), baton.ErrLost) {
		t.Fatalf("Err of the lost hold: %v", h1.Err())
	}
	if h2.Token() <= h1.Token() {
		t.Fatalf("token of the new holder %d <= stale token %d", h2.Token(), h1.Token())
	}
	return h2
}

// TestTerminatedHolder: the holder's session is ended by the server
// (pg_terminate_backend), which frees its advisory lock at once. The next
// holder waits out the lease the holder left on the counter row, so the
// holder's Loss has fired when it gets the lock; the holder's Unlock
// reports the loss, and tokens keep increasing.
func TestTerminatedHolder(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	m1 := mutexT(t, openT(t, url), "fault-terminate")
	m2 := mutexT(t, openT(t, url), "fault-terminate")
	h1, err := m1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	terminateHolder(t, baton.KindMutex, "fault-terminate")
	h2 := afterLoss(t, h1, m2, true)
	if err := m1.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock of the terminated hold: %v, want ErrLost", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The handle whose session was terminated takes the lock again.
	h3, err := m1.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after the loss: %v", err)
	}
	if h3.Token() <= h2.Token() {
		t.Errorf("token %d after %d", h3.Token(), h2.Token())
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestServerRestart: the server restarts under a holder. A client that
// asks for the lock as soon as the server is back gets it only after the
// holder's Loss fired, and the token counter survived the restart.
func TestServerRestart(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	m1 := mutexT(t, openT(t, url), "fault-restart")
	m2 := mutexT(t, openT(t, url), "fault-restart")
	h0, err := m2.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h1, err := m1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.restart(t)
	h2 := afterLoss(t, h1, m2, true)
	if h1.Token() <= h0.Token() || h2.Token() <= h1.Token() {
		t.Errorf("tokens %d, %d, %d across the restart", h0.Token(), h1.Token(), h2.Token())
	}
	if err := m1.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock of the hold from before the restart: %v, want ErrLost", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// proxy forwards TCP connections to the server until frozen: then it stops
// forwarding in both directions and keeps the sockets open, as a network
// partition leaves a half-open connection.
type proxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	thaw   chan struct{}
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, thaw: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		if p.frozen {
			close(p.thaw)
			p.frozen = false
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			wg.Go(func() { p.pipe(c, s) })
			wg.Go(func() { p.pipe(s, c) })
		}
	})
	return p
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			frozen, thaw := p.frozen, p.thaw
			p.mu.Unlock()
			if frozen {
				<-thaw
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// url returns url with the proxy's address instead of the server's.
func (p *proxy) url(url string) string {
	i := strings.Index(url, "@") + 1
	j := i + strings.Index(url[i:], "/")
	return url[:i] + p.l.Addr().String() + url[j:]
}

// TestPartitionedHolder: the holder's connection goes silent without
// closing. The holder's Loss fires before the server ends its session and
// grants the lock to another client, and the server really ends the
// session (idle_session_timeout).
func TestPartitionedHolder(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	px := startProxy(t, strings.Split(strings.Split(url, "@")[1], "/")[0])
	m1 := mutexT(t, openT(t, px.url(url)), "fault-partition")
	m2 := mutexT(t, openT(t, url), "fault-partition")
	h1, err := m1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pids := holderPIDs(t, baton.KindMutex, "fault-partition")
	if len(pids) != 1 {
		t.Fatalf("holders on the server: %v", pids)
	}
	px.freeze()
	frozen := time.Now()
	h2 := afterLoss(t, h1, m2, true)
	if waited := time.Since(frozen); waited > 3*faultTTL {
		t.Errorf("the partitioned holder's session ended %v after the partition", waited)
	}
	if sessionAlive(t, pids[0]) {
		t.Errorf("the partitioned holder's session %d is still on the server", pids[0])
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = h2
}

// TestTerminatedWriter: a reader after a writer whose session was
// terminated also waits out the writer's lease.
func TestTerminatedWriter(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	rw := func(b baton.Backend) baton.RWMutex {
		m, err := b.RWMutex(ctx, "fault-terminate-rw")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	w, r := rw(openT(t, url)), rw(openT(t, url))
	h1, err := w.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	terminateHolder(t, baton.KindRWMutex, "fault-terminate-rw")
	h2, err := r.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h1.Lost():
	default:
		t.Fatal("a reader holds the lock while the terminated writer's Loss has not fired")
	}
	if h2.Token() <= h1.Token() {
		t.Errorf("reader's token %d <= writer's %d", h2.Token(), h1.Token())
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
}
