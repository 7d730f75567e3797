package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/locktest"
)

// A ZooKeeper session can be ended by a client that knows its id and
// password: it connects with them and closes the session, and the server
// deletes the session's ephemeral nodes. The password is known only to the
// session's own client, so the test reads it on the way: its backends
// connect through sessionProxy, which notes every session the server
// grants.

// sessionProxy forwards loopback connections to a server and reads the
// server's answer to each connect request (length, protocol version,
// timeout, session id, password).
type sessionProxy struct {
	addr, to string
	l        net.Listener
	wg       sync.WaitGroup

	mu       sync.Mutex
	passwd   map[int64][]byte // by session id; guarded by mu
	conns    []net.Conn       // guarded by mu
	shutdown bool             // guarded by mu
}

func startSessionProxy(t *testing.T, to string) *sessionProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &sessionProxy{addr: l.Addr().String(), to: to, l: l, passwd: map[int64][]byte{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *sessionProxy) accept() {
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
		if p.shutdown {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			copyConn(s, c)
			s.Close()
		}()
		go func() {
			defer p.wg.Done()
			defer c.Close()
			if body, err := readFrame(s); err == nil {
				p.note(body)
				if writeFrame(c, body) != nil {
					return
				}
			}
			copyConn(c, s)
		}()
	}
}

// copyConn copies what from sends to to, through a buffer: io.Copy would
// splice through pipes that stay cached after the test (as open fds).
func copyConn(to io.Writer, from io.Reader) {
	_, _ = io.CopyBuffer(struct{ io.Writer }{to}, struct{ io.Reader }{from}, make([]byte, 32<<10))
}

// note records the session of a connect response.
func (p *sessionProxy) note(body []byte) {
	if len(body) < 20 {
		return
	}
	id := int64(binary.BigEndian.Uint64(body[8:]))
	n := int(binary.BigEndian.Uint32(body[16:]))
	if id == 0 || len(body) < 20+n {
		return
	}
	p.mu.Lock()
	p.passwd[id] = append([]byte(nil), body[20:20+n]...)
	p.mu.Unlock()
}

func (p *sessionProxy) close() {
	p.l.Close()
	p.mu.Lock()
	p.shutdown = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err := io.ReadFull(r, body)
	return body, err
}

func writeFrame(w io.Writer, body []byte) error {
	return binary.Write(w, binary.BigEndian, append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
}

// closeSession ends session id on the server at addr, as its own client's
// Close would.
func closeSession(addr string, id int64, passwd []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// Connect request: protocol version, last zxid seen, timeout (ms),
	// session id, password, read-only.
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 30000)
	req = binary.BigEndian.AppendUint64(req, uint64(id))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(append(req, passwd...), 0)
	if err := writeFrame(c, req); err != nil {
		return err
	}
	resp, err := readFrame(c)
	if err != nil {
		return err
	}
	if len(resp) < 16 || int64(binary.BigEndian.Uint64(resp[8:])) != id {
		return fmt.Errorf("the server did not resume session %#x", id)
	}
	// Close request: xid, op code closeSession (-11).
	cl := binary.BigEndian.AppendUint32(nil, 1)
	cl = binary.BigEndian.AppendUint32(cl, uint32(0xffffffff-10))
	if err := writeFrame(c, cl); err != nil {
		return err
	}
	_, err = readFrame(c)
	return err
}

// killer returns the suite's KillSession for backends that connect
// through p to the server at addr: it closes the session that owns the
// holder's node.
func (p *sessionProxy) killer(addr string) locktest.SessionKiller {
	return func(cfg, name string) (bool, error) { return false, p.kill(addr, cfg, baton.KindMutex, name) }
}

// kill closes the session that owns the one node of name of kind, and
// returns once the server has deleted the node.
func (p *sessionProxy) kill(addr, cfg string, kind baton.Kind, name string) error {
	err := func() error {
		t, err := parseURL(cfg)
		if err != nil {
			return err
		}
		o, err := buildConfig(t.opts)
		if err != nil {
			return err
		}
		c, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
		if err != nil {
			return err
		}
		defer c.Close()
		dir := (&backend{o: o}).dir(kind, name) + "/q"
		kids, _, err := c.Children(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if len(kids) != 1 {
			return fmt.Errorf("%s: %q, want the holder's node only", dir, kids)
		}
		_, st, err := c.Get(dir + "/" + kids[0])
		if err != nil {
			return err
		}
		p.mu.Lock()
		pw, ok := p.passwd[st.EphemeralOwner]
		p.mu.Unlock()
		if !ok {
			return fmt.Errorf("session %#x was not seen by the proxy", st.EphemeralOwner)
		}
		if err := closeSession(addr, st.EphemeralOwner, pw); err != nil {
			return err
		}
		// Back once the server has deleted the session's node.
		for {
			if ok, _, err := c.Exists(dir + "/" + kids[0]); err != nil || !ok {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return err
}

// TestSessionKilled: the suite's SessionKilled test, with the holder's
// session closed on the server by another client.
func TestSessionKilled(t *testing.T) {
	addr := standalone(t)
	p := startSessionProxy(t, addr)
	s := suite
	s.KillSession = p.killer(addr)
	locktest.RunSessionKilled(t, s, suiteURL(p.addr, "session"))
}

// TestSessionKilledSemaphore: a release of permits (all of them, or some)
// whose session was closed on the server reports ErrLost, with the
// hold's Loss fired by then.
func TestSessionKilledSemaphore(t *testing.T) {
	addr := standalone(t)
	p := startSessionProxy(t, addr)
	u := suiteURL(p.addr, "session-sem")
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		acquire int64
	}{{"All", 1}, {"Some", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := open(t, u).Semaphore(ctx, "sem-"+tc.name, 2)
			if err != nil {
				t.Fatal(err)
			}
			h, err := s.Acquire(ctx, tc.acquire)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.kill(addr, u, baton.KindSemaphore, "sem-"+tc.name); err != nil {
				t.Fatal(err)
			}
			if err := s.Release(ctx, 1); !errors.Is(err, baton.ErrLost) {
				t.Errorf("Release after the session was closed: %v, want ErrLost", err)
			}
			if h.Err() == nil {
				t.Error("Release reported the loss, but Hold.Err is nil")
			}
			// The permits left are given back with the lost hold, and the
			// backend goes on with a new session.
			if _, err := s.Acquire(ctx, 2); err != nil {
				t.Fatalf("Acquire after the loss: %v", err)
			}
			if err := s.Release(ctx, 2); err != nil {
				t.Fatal(err)
			}
		})
	}
}
