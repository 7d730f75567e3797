package zklock

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy forwards loopback TCP connections to a server; cut makes it drop
// every byte both ways on every connection, old and new, as a network
// partition would, without closing anything.
type proxy struct {
	addr string
	to   string
	l    net.Listener
	cut  atomic.Bool
	// mute drops what the server sends only: requests arrive and are
	// applied, their replies are lost.
	mute atomic.Bool

	mu    sync.Mutex
	conns []net.Conn // guarded by mu
	wg    sync.WaitGroup
}

func startProxy(t testing.TB, to string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: l.Addr().String(), to: to, l: l}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

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
		go p.pipe(c, s, false)
		go p.pipe(s, c, true)
	}
}

func (p *proxy) pipe(from, to net.Conn, reply bool) {
	defer p.wg.Done()
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		if p.cut.Load() || reply && p.mute.Load() {
			continue
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// heal ends the partition; the connections that lost bytes are closed, so
// that the clients reconnect on clean streams.
func (p *proxy) heal() {
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.cut.Store(false)
	p.mute.Store(false)
	p.mu.Unlock()
}
