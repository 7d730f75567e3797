package zklock

import (
	"encoding/binary"
	"net"
	"sync/atomic"
)

// go-zookeeper v1.0.4 keeps the last zxid its replies carried in a field
// that its receiving goroutine writes at every reply, and that another of
// its goroutines reads, unsynchronized, to set its watches again on a new
// connection (a data race: go-zookeeper/zk#35, unmerged). wireConn keeps
// that field from being written at all: it zeroes the zxid in every reply
// header the client reads (the client records only positive ones) and
// keeps the newest itself, which it writes into the two requests that
// carry the field: the connect request of a resumed session (the zxid
// the server must have seen to take the client) and set-watches (the zxid
// after which the server fires the watches' missed events). A connect
// request for a new session carries 0, as the client sends it, and starts
// the count again.

// opSetWatches is the wire protocol's op code of set-watches.
const opSetWatches = 101

// wireConn is a client connection to one server. It also reads the
// session timeout the server grants out of the connect response.
type wireConn struct {
	net.Conn
	got  func(ms int32)
	zxid *atomic.Int64 // the newest zxid a reply carried in this session

	sent bool // written by the client's connecting goroutine, then by its sender

	// Read side: the client reads the connect response, then its
	// receiving goroutine reads the replies.
	head   [12]byte // the connect response's first bytes: length, version, timeout
	nhead  int
	hdr    [4]byte // the current frame's length
	nhdr   int
	left   int      // bytes of the current frame's body not read yet
	off    int      // bytes of it read
	rh     [12]byte // a reply's header: xid, zxid
	frames int      // whole frames read, the connect response first
}

func newWireConn(c net.Conn, zxid *atomic.Int64, got func(ms int32)) *wireConn {
	return &wireConn{Conn: c, got: got, zxid: zxid}
}

// Write sends one whole packet: length, then the connect request's fields
// (version, last zxid, timeout, session id, ...) or a request's header
// (xid, op code) and body, which for set-watches begins with a zxid.
func (c *wireConn) Write(p []byte) (int, error) {
	switch {
	case !c.sent:
		c.sent = true
		if len(p) >= 28 {
			if binary.BigEndian.Uint64(p[20:28]) == 0 {
				c.zxid.Store(0)
			} else {
				p = withZxid(p, 8, c.zxid.Load())
			}
		}
	case len(p) >= 20 && binary.BigEndian.Uint32(p[8:12]) == opSetWatches:
		p = withZxid(p, 12, c.zxid.Load())
	}
	return c.Conn.Write(p)
}

// withZxid returns a copy of p with zxid at offset at.
func withZxid(p []byte, at int, zxid int64) []byte {
	q := append([]byte(nil), p...)
	binary.BigEndian.PutUint64(q[at:], uint64(zxid))
	return q
}

func (c *wireConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.read(p[:k])
	return k, err
}

// read follows the frames the client reads, a length then a body, and
// takes the zxid out of the replies' headers.
func (c *wireConn) read(b []byte) {
	if c.nhead < len(c.head) {
		c.nhead += copy(c.head[c.nhead:], b)
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
			c.left, c.off = int(binary.BigEndian.Uint32(c.hdr[:])), 0
		}
		n := min(c.left, len(b))
		if c.frames > 0 && c.off < len(c.rh) {
			c.reply(b[:min(n, len(c.rh)-c.off)])
		}
		c.left -= n
		c.off += n
		b = b[n:]
		if c.left == 0 {
			c.nhdr = 0
			c.frames++
		}
	}
}

// reply reads b, the bytes of a reply's header from c.off on, keeping the
// zxid and zeroing it in b.
func (c *wireConn) reply(b []byte) {
	for i := range b {
		at := c.off + i
		c.rh[at] = b[i]
		if at >= 4 {
			b[i] = 0
		}
		if at == len(c.rh)-1 {
			if z := int64(binary.BigEndian.Uint64(c.rh[4:12])); z > c.zxid.Load() {
				c.zxid.Store(z)
			}
		}
	}
}
