package zklock

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// When the ZooKeeper client resumes its session on a new connection with
// watches set, one of its goroutines reads the last zxid it has seen (to
// set the watches again) while its receiving goroutine, already started,
// writes it at every reply: a data race inside go-zookeeper v1.0.4 (its
// #35, unmerged), which the race detector reports once replies to requests
// queued during the outage arrive before the set-watches request is
// written. wireConn closes it from outside: on a resumed connection it
// hands the receiving goroutine no reply (but those to the credentials the
// client sends first and waits for) until the client has written its
// set-watches request, which it does after that read; the handoff through
// wireConn's channel orders every later write after it.
//
// The client sends set-watches only when it has watches, and nothing tells
// from outside whether it has: the backend keeps one set at all times
// (the resume watch, an exists watch on a node nobody makes, set again in
// every session; heartbeats), and only connections that resume a session
// whose resume watch is set wait, for resumeGateMax at most. A new
// session begins with no watches; a watch set through its first
// connection before the client looks at them leaves the race open there.

// The wire protocol's op codes that wireConn reads.
const (
	opSetAuth     = 100
	opSetWatches  = 101
	resumeGateMax = time.Second // a wait that outlasts it opens the gate
)

// resumeWatchPath is the node the resume watch is set on: under the
// prefix, a name no node of the backend has.
func resumeWatchPath(prefix string) string { return prefix + "/.resume-watch" }

// wireConn is a client connection to one server. It also reads the
// session timeout the server grants out of the connect response.
type wireConn struct {
	net.Conn
	got   func(ms int32)
	armed *atomic.Int64 // the session whose resume watch is set

	// Read side: the client reads the connect response, then its
	// receiving goroutine reads replies, one at a time.
	head   [12]byte // the connect response's first bytes: length, version, timeout
	nhead  int
	hdr    [4]byte // the current frame's length
	nhdr   int
	left   int // bytes of the current frame's body not read yet
	frames int // whole frames read, the connect response first

	// Write side, set by the connect request (the first write), before
	// the receiving goroutine starts.
	sent  bool  // the connect request was written
	gated bool  // a resumed session whose resume watch is set
	zxid  int64 // the last zxid the connect request carried

	mu     sync.Mutex
	auths  int           // set-auth requests written; guarded by mu
	kick   chan struct{} // an auth request was written
	open   chan struct{} // closed when the gate opens
	opened bool          // guarded by mu
	done   chan struct{} // closed by Close
	shut   sync.Once
}

func newWireConn(c net.Conn, armed *atomic.Int64, got func(ms int32)) *wireConn {
	return &wireConn{Conn: c, got: got, armed: armed, kick: make(chan struct{}, 1), open: make(chan struct{}), done: make(chan struct{})}
}

func (c *wireConn) Write(p []byte) (int, error) {
	c.wrote(p)
	return c.Conn.Write(p)
}

// wrote reads one whole packet the client writes: length, then the
// connect request's fields (version, last zxid, timeout, session id) or a
// request's header (xid, op code) and body.
func (c *wireConn) wrote(p []byte) {
	if !c.sent {
		c.sent = true
		if len(p) >= 28 {
			c.zxid = int64(binary.BigEndian.Uint64(p[8:16]))
			sid := int64(binary.BigEndian.Uint64(p[20:28]))
			c.gated = sid != 0 && c.armed != nil && c.armed.Load() == sid
		}
		return
	}
	if len(p) < 12 {
		return
	}
	switch binary.BigEndian.Uint32(p[8:12]) {
	case opSetAuth:
		c.mu.Lock()
		c.auths++
		c.mu.Unlock()
		select {
		case c.kick <- struct{}{}:
		default:
		}
	case opSetWatches:
		// Its first field is the last zxid the client read, which is
		// still the one it sent in the connect request: no reply has
		// been handed over since.
		if len(p) >= 20 && int64(binary.BigEndian.Uint64(p[12:20])) == c.zxid {
			c.openGate()
		}
	}
}

func (c *wireConn) openGate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.opened {
		c.opened = true
		close(c.open)
	}
}

func (c *wireConn) Read(p []byte) (int, error) {
	if err := c.wait(); err != nil {
		return 0, err
	}
	k, err := c.Conn.Read(p)
	c.read(p[:k])
	return k, err
}

// wait holds a read of a reply on a gated connection until the gate opens;
// the replies to set-auth requests, which the client sends and waits for
// before any other request, go through.
func (c *wireConn) wait() error {
	if !c.gated || c.frames == 0 || c.nhdr > 0 || c.left > 0 {
		return nil
	}
	t := time.NewTimer(resumeGateMax)
	defer t.Stop()
	for {
		c.mu.Lock()
		pass := c.opened || c.frames-1 < c.auths
		c.mu.Unlock()
		if pass {
			return nil
		}
		select {
		case <-c.open:
		case <-c.kick:
		case <-c.done:
			return net.ErrClosed
		case <-t.C:
			c.openGate()
		}
	}
}

// read follows the frames the client reads: a length, then a body.
func (c *wireConn) read(b []byte) {
	if c.nhead < len(c.head) {
		n := copy(c.head[c.nhead:], b)
		c.nhead += n
		if c.nhead == len(c.head) && c.got != nil {
			c.got(int32(binary.BigEndian.Uint32(c.head[8:12])))
		}
	}
	for len(b) > 0 {
		if c.nhdr < len(c.hdr) {
			n := copy(c.hdr[c.nhdr:], b)
			c.nhdr += n
			b = b[n:]
			if c.nhdr < len(c.hdr) {
				return
			}
			c.left = int(binary.BigEndian.Uint32(c.hdr[:]))
		}
		n := min(c.left, len(b))
		c.left -= n
		b = b[n:]
		if c.left == 0 {
			c.nhdr = 0
			c.frames++
		}
	}
}

func (c *wireConn) Close() error {
	c.shut.Do(func() { close(c.done) })
	return c.Conn.Close()
}
