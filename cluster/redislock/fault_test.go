package redislock

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// fenced is a resource that refuses tokens older than the newest it accepted.
type fenced struct {
	mu   sync.Mutex
	last baton.Token // guarded by mu
}

func (f *fenced) write(tok baton.Token) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tok <= f.last {
		return errors.New("stale token")
	}
	f.last = tok
	return nil
}

func open(t *testing.T, url string) baton.Backend {
	t.Helper()
	b, err := OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func mutex(t *testing.T, b baton.Backend, name string) baton.Mutex {
	t.Helper()
	m, err := b.Mutex(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// lockAfterLoss checks the promise of the lost signal: the first holder's
// Loss fires before the second holder gets the lock, and the resource
// refuses the first holder's token afterwards.
func lockAfterLoss(t *testing.T, h1 baton.Hold, m2 baton.Mutex, res *fenced) baton.Hold {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	h2, err := m2.Lock(ctx)
	if err != nil {
		t.Fatalf("second client: %v", err)
	}
	select {
	case <-h1.Lost():
	default:
		t.Fatal("second client holds the lock while the first holder's Loss has not fired")
	}
	if !errors.Is(h1.Err(), baton.ErrLost) {
		t.Fatalf("Err of the lost hold: %v", h1.Err())
	}
	if h2.Token() <= h1.Token() {
		t.Fatalf("token of the new holder %d <= stale token %d", h2.Token(), h1.Token())
	}
	if err := res.write(h2.Token()); err != nil {
		t.Fatalf("new holder refused: %v", err)
	}
	if err := res.write(h1.Token()); err == nil {
		t.Fatal("fenced resource accepted the stale token")
	}
	return h2
}

func TestPausedServerFiresLossFirst(t *testing.T) {
	s := startRedis(t)
	m1 := mutex(t, open(t, s.URL("ttl=1s")), "paused")
	m2 := mutex(t, open(t, s.URL("ttl=1s")), "paused")
	res := &fenced{}
	h1, err := m1.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := res.write(h1.Token()); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGSTOP)
	select {
	case <-h1.Lost():
	case <-time.After(3 * time.Second):
		s.Signal(syscall.SIGCONT)
		t.Fatal("Loss did not fire while the server was paused past the TTL")
	}
	time.Sleep(200 * time.Millisecond)
	s.Signal(syscall.SIGCONT)
	h2 := lockAfterLoss(t, h1, m2, res)
	_ = h2
	if err := m1.Unlock(context.Background()); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock of the lost hold: %v, want ErrLost", err)
	}
	// The stale holder's unlock did not free the new holder's lock.
	if _, err := m1.TryLock(context.Background()); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryLock after stale unlock: %v, want ErrLocked", err)
	}
	if err := m2.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRestartWithoutPersistence(t *testing.T) {
	s := startRedis(t)
	m1 := mutex(t, open(t, s.URL("ttl=1s")), "restart")
	m2 := mutex(t, open(t, s.URL("ttl=1s")), "restart")
	res := &fenced{}
	h1, err := m1.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := res.write(h1.Token()); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	select {
	case <-h1.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Loss did not fire after the server forgot the lock")
	}
	// The counter was lost too; it restarts from the server clock, above
	// every token drawn before.
	lockAfterLoss(t, h1, m2, res)
	if err := m1.Unlock(context.Background()); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock of the lost hold: %v, want ErrLost", err)
	}
	if err := m2.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// proxy forwards TCP connections to a server until cut.
type proxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn // guarded by mu
	cut   bool       // guarded by mu
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(u, c); u.Close() }()
			go func() { defer p.wg.Done(); io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { p.l.Close(); p.cutAll(); p.wg.Wait() })
	return p
}

// cutAll drops every connection and refuses new ones.
func (p *proxy) cutAll() {
	p.mu.Lock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

func TestClientCutOff(t *testing.T) {
	s := startRedis(t)
	p := startProxy(t, s.Addr())
	m1 := mutex(t, open(t, "redis://"+p.l.Addr().String()+"?ttl=1s&max_retries=0"), "cut")
	m2 := mutex(t, open(t, s.URL("ttl=1s")), "cut")
	res := &fenced{}
	h1, err := m1.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := res.write(h1.Token()); err != nil {
		t.Fatal(err)
	}
	p.cutAll()
	lockAfterLoss(t, h1, m2, res)
	if err := m1.Unlock(context.Background()); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock of the cut-off hold: %v, want ErrLost", err)
	}
	if err := m2.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCancelledWaitersLeaveNothing(t *testing.T) {
	s := startRedis(t)
	url := s.URL("ttl=2s")
	holder := mutex(t, open(t, url), "queue")
	if _, err := holder.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	keys := mutexKeys(DefaultPrefix, "queue")
	var wg sync.WaitGroup
	for range 5 {
		m := mutex(t, open(t, url), "queue")
		ctx, cancel := context.WithCancel(context.Background())
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Lock(ctx)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled waiter: %v", err)
			}
		}()
		// Wait until it is queued on the server, then cancel it.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, _ := c.ZCard(context.Background(), keys[3]).Result()
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("waiter never queued")
			}
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		cancel()
		wg.Wait()
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Errorf("cancelled waiter returned after %v", d)
		}
		if n, _ := c.ZCard(context.Background(), keys[3]).Result(); n != 0 {
			t.Fatalf("%d queue entries left after cancel", n)
		}
		if n, _ := c.LLen(context.Background(), keys[2]).Result(); n != 0 {
			t.Fatalf("%d elements left in line after cancel", n)
		}
	}
	if err := holder.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := mutex(t, open(t, url), "queue")
	if _, err := other.TryLock(context.Background()); err != nil {
		t.Fatalf("lock free after the holder left and waiters cancelled: %v", err)
	}
	if err := other.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A waiter that dies while queued (its process is gone, nobody cancels)
// leaves an entry that expires with the TTL and does not block the queue.
func TestDeadWaiterExpires(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	keys := append(mutexKeys(DefaultPrefix, "dead"), DefaultPrefix+"alive")
	// A queue entry as a client that died would leave it.
	if err := scriptMutexAcquire.Run(context.Background(), c, keys, "holder", 1000, "1 h", 0, "").Err(); err != nil {
		t.Fatal(err)
	}
	if err := scriptMutexAcquire.Run(context.Background(), c, keys, "ghost", 1000, "1 h", 0, "nobody").Err(); err != nil {
		t.Fatal(err)
	}
	m := mutex(t, open(t, s.URL("ttl=1s")), "dead")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock behind a dead holder and a dead waiter: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("took %v, more than TTLs allow", d)
	}
	if h.Token() == 0 {
		t.Fatal("no token")
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}
