package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// DefaultPrefix is the path under which every node lives by default.
const DefaultPrefix = "/baton"

// Node layout, under the prefix P, with <n> the name with '%', '/' and
// every byte outside printable ASCII percent-encoded, so that one name's
// directory never holds another's nodes:
//
//	P/<kind>/<n>            persistent; a semaphore's capacity as data
//	P/<kind>/<n>/q          persistent; parent of the queue
//	P/<kind>/<n>/q/<node>   one ephemeral sequential node per acquisition
//
// <node> is <tag>-<id>-<seq>: tag m (mutex), r or w (read or write), s
// (semaphore) or c (cond waiter); id unique per acquisition; seq the
// server's ten-digit sequence number, which orders the queue.

// backend is the driver.Backend; baton.NewBackend wraps it.
type backend struct {
	c          *zk.Conn
	own        bool // c was dialled by OpenURL and is closed with the backend
	o          lease.Config
	bid        string        // random, the first part of every node id
	seq        atomic.Uint64 // numbers node ids
	negotiated *atomic.Int64 // session timeout the server granted, ns; 0 unknown
	acl        []zk.ACL      // of every node the backend creates
	conns      *lastConn     // OpenURL's connections, closed with the backend; nil for New

	epochMu sync.Mutex
	cur     atomic.Pointer[epoch]

	stop    chan struct{}
	bg      sync.WaitGroup
	closed  atomic.Bool
	closeMu sync.Mutex
}

// New returns a Backend on a ZooKeeper connection, which stays the
// caller's: closing the Backend does not close it. The TTL option (default
// lease.DefaultTTL) must not exceed the session timeout the server granted
// the connection: a hold is trusted until the last answered heartbeat's
// send time plus the TTL, less a tenth of the TTL and the drift margin
// (see the package doc, Sessions and loss). Give it the timeout passed
// to zk.Connect when the server's limits allow it.
func New(conn *zk.Conn, opts ...lease.Option) (baton.Backend, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: nil connection", baton.ErrInvalidArgument)
	}
	o, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(newBackend(conn, false, o, new(atomic.Int64), zk.WorldACL(zk.PermAll))), nil
}

func buildConfig(opts []lease.Option) (lease.Config, error) {
	o, err := lease.Build(lease.Spec{Prefix: DefaultPrefix}, opts)
	if err != nil {
		return o, err
	}
	p := "/" + strings.Trim(o.Prefix, "/")
	if p == "/" || strings.Contains(p, "//") {
		return o, fmt.Errorf("%w: prefix %q: not a node path", baton.ErrInvalidArgument, o.Prefix)
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "." || seg == ".." {
			return o, fmt.Errorf("%w: prefix %q: not a node path", baton.ErrInvalidArgument, o.Prefix)
		}
	}
	o.Prefix = p
	if m := o.TTL/marginDivisor + o.Drift; m >= o.TTL-o.RenewEvery {
		return o, fmt.Errorf("%w: drift margin %v and a tenth of the TTL (%v in all) leave no time to renew a session of %v every %v",
			baton.ErrInvalidArgument, o.Drift, m, o.TTL, o.RenewEvery)
	}
	return o, nil
}

func newBackend(c *zk.Conn, own bool, o lease.Config, neg *atomic.Int64, acl []zk.ACL) *backend {
	var r [8]byte
	_, _ = rand.Read(r[:])
	b := &backend{c: c, own: own, o: o, bid: hex.EncodeToString(r[:]), stop: make(chan struct{}), negotiated: neg, acl: acl}
	b.bg.Add(1)
	go b.heartbeats()
	return b
}

func (b *backend) Kind() string { return "zookeeper" }

// ValidateName has nothing to add: encoded names are short enough.
func (b *backend) ValidateName(string) error { return nil }

func (b *backend) Close() error {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Swap(true) {
		return nil
	}
	close(b.stop)
	b.epochMu.Lock()
	if e := b.cur.Load(); e != nil {
		e.end(baton.ErrClosed)
	}
	b.epochMu.Unlock()
	// Closing the connection first ends the requests still waiting for
	// it; the session's nodes go with it.
	if b.own {
		b.c.Close()
	}
	if b.conns != nil {
		b.conns.close()
	}
	b.bg.Wait()
	return nil
}

// dir returns the directory of a name of a kind.
func (b *backend) dir(kind baton.Kind, name string) string {
	return b.o.Prefix + "/" + string(kind) + "/" + encodeName(name)
}

func encodeName(name string) string {
	var sb strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '%' || c == '/' || c < 0x21 || c > 0x7e {
			fmt.Fprintf(&sb, "%%%02X", c)
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// newID returns a node id unique among all acquisitions of all clients.
func (b *backend) newID() string {
	return b.bid + "." + strconv.FormatUint(b.seq.Add(1), 16)
}

// ensure creates path and its missing parents as persistent nodes; the
// last one gets data.
func (b *backend) ensure(path string, data []byte) error {
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		var d []byte
		if i == len(path) {
			d = data
		}
		_, err := b.c.Create(path[:i], d, 0, b.acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// entry is one node of a queue.
type entry struct {
	name string
	tag  byte
	seq  int64
}

// parseQueue returns the nodes of a queue sorted by sequence number; names
// it does not know are left out.
func parseQueue(names []string) []entry {
	es := make([]entry, 0, len(names))
	for _, n := range names {
		i := strings.LastIndexByte(n, '-')
		if i < 0 || len(n) < 3 || n[1] != '-' {
			continue
		}
		s, err := strconv.ParseInt(n[i+1:], 10, 64)
		if err != nil {
			continue
		}
		es = append(es, entry{name: n, tag: n[0], seq: s})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].seq < es[j].seq })
	return es
}

// idOf returns the id part of a node name.
func idOf(name string) string {
	i, j := strings.IndexByte(name, '-'), strings.LastIndexByte(name, '-')
	if i < 0 || j <= i {
		return ""
	}
	return name[i+1 : j]
}

// node is what an acquisition created: its path, token (creation zxid) and
// the epoch it belongs to.
type node struct {
	e     *epoch
	q     string // the queue's path
	id    string
	path  string
	name  string
	seq   int64
	token uint64
}

// create adds a node to the queue q, creating the directory dir (with
// dirData) and q when missing. It writes q's data in the same transaction,
// only to learn the transaction's zxid from q's new stat: the node's
// creation zxid, which is the token (a sequence number restarts when the
// queue is removed and made again; a zxid never goes back).
//
// The request is never abandoned half-way: when ctx ends first, the caller
// returns, and the node is deleted once the server answers. When the answer
// is lost with the connection, the node may exist or not: its id, unique to
// this acquisition, finds it (see forget).
func (b *backend) create(ctx context.Context, dir string, dirData []byte, tag byte, data []byte) (*node, error) {
	e, err := call(b, ctx, b.epoch)
	if err != nil {
		return nil, err
	}
	q := dir + "/q"
	n := &node{e: e, q: q, id: b.newID()}
	prefix := q + "/" + string(tag) + "-" + n.id + "-"
	do := func() error {
		// A queue found missing was never made, or was deleted with its
		// directory as the name went idle (remove): make both again. A
		// releaser can delete them again before this node is in; then the
		// next round makes them once more.
		for range 8 {
			res, err := b.c.Multi(
				&zk.CreateRequest{Path: prefix, Data: data, Acl: b.acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
				&zk.SetDataRequest{Path: q, Version: -1},
			)
			if err == nil {
				n.path = res[0].String
				n.name = n.path[len(q)+1:]
				n.seq, _ = strconv.ParseInt(n.path[strings.LastIndexByte(n.path, '-')+1:], 10, 64)
				n.token = uint64(res[1].Stat.Mzxid)
				return nil
			}
			if !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			if err := b.ensure(dir, dirData); err != nil {
				return err
			}
			// Not ensure: a directory deleted again meanwhile must be
			// made with its data, by the next round.
			if _, err := b.c.Create(q, nil, 0, b.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
		return zk.ErrNoNode
	}
	if ctx.Done() == nil {
		if err := do(); err != nil {
			b.forget(n, err)
			return nil, err
		}
		return n, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan error) // unbuffered: a send fails once the caller left
	gone := make(chan struct{})
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		err := do()
		select {
		case ch <- err:
		case <-gone:
			b.forget(n, err)
		}
	}()
	select {
	case err := <-ch:
		if err != nil {
			b.forget(n, err)
			return nil, err
		}
		return n, nil
	case <-ctx.Done():
		close(gone)
		return nil, ctx.Err()
	}
}

// forget deletes what an acquisition created and no longer wants. err is
// the outcome of its create: nil (the node is known), or an error after
// which the node may exist anyway (the reply was lost); the node is then
// looked for by its id, now and once more a request timeout later, since a
// create sent on a connection that broke can still be applied after the
// first look. The caller waits for the first attempt for a moment, and not
// at all once the epoch ended (the connection is likely down); the rest
// goes on in the background.
func (b *backend) forget(n *node, err error) {
	if err != nil && (errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrNoNode) ||
		errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrInvalidACL)) {
		return // nothing was created
	}
	first := make(chan struct{})
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		if n.path != "" && err == nil {
			ok := b.deleteNode(n.path)
			close(first)
			if !ok {
				b.sweep(n, 0)
			}
			return
		}
		close(first)
		b.sweep(n, 0)
		b.sweep(n, b.o.RequestTimeout)
	}()
	if n.e.ended() != nil {
		return
	}
	t := time.NewTimer(min(b.o.RequestTimeout, 500*time.Millisecond))
	defer t.Stop()
	select {
	case <-first:
	case <-t.C:
	case <-n.e.done:
	}
}

// deleteNode deletes a node of this backend's; it reports false when the
// outcome is unknown.
func (b *backend) deleteNode(path string) bool {
	err := b.c.Delete(path, -1)
	return err == nil || errors.Is(err, zk.ErrNoNode)
}

// sweep waits, then deletes the nodes of n's id, retrying until it has
// looked once, the epoch of n ended with its session (then the server
// deletes them) or the backend closed.
func (b *backend) sweep(n *node, wait time.Duration) {
	for attempt := 0; ; attempt++ {
		select {
		case <-b.stop:
			return
		case <-time.After(wait):
		}
		if sid := b.c.SessionID(); sid != n.e.sid {
			return
		}
		names, _, err := b.c.Children(n.q)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err == nil {
			ok := true
			for _, name := range names {
				if idOf(name) == n.id {
					ok = b.deleteNode(n.q+"/"+name) && ok
				}
			}
			if ok {
				return
			}
		}
		wait = min(time.Duration(attempt+1)*50*time.Millisecond, time.Second)
	}
}

// call runs f, which makes one request, and returns when it does or when
// ctx ends first (f then finishes in the background): a request can wait
// for a connection for up to the session timeout.
func call[T any](b *backend, ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// req makes one request that waits for no other holder, bounded by ctx
// and the request timeout.
func req[T any](b *backend, ctx context.Context, f func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.RequestTimeout)
	defer cancel()
	return call(b, ctx, f)
}

// waitEvent waits for a watch to fire, ctx to end or the epoch to end.
func waitEvent(ctx context.Context, e *epoch, w <-chan zk.Event) error {
	select {
	case ev := <-w:
		if ev.Err != nil {
			if errors.Is(ev.Err, zk.ErrSessionExpired) {
				e.end(errExpired)
				return e.lostErr()
			}
			if errors.Is(ev.Err, zk.ErrClosing) {
				return fmt.Errorf("%w: connection closed", baton.ErrClosed)
			}
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.done:
		return e.lostErr()
	}
}

var _ driver.Backend = (*backend)(nil)
