// Package redlock is the Redlock backend of baton: a Mutex held on a
// majority of N independent Redis nodes (see New for what that does and
// does not guarantee). Its RWMutex, Semaphore, Cond and Value return an
// error matching baton.ErrUnsupported. A Value is not offered because a
// compare-and-swap on independent nodes is not safe without consensus: a
// swap that wins on a majority also leaves the losing writers' swaps
// applied on the nodes where they came first, and nothing can take those
// back atomically, so the nodes then hold different data under one
// version, and a node restarted empty forgets its vote altogether. Use
// redislock or etcdlock for values. Every hold is a lease: New and OpenURL take
// the options of package lease, the same as every lease backend's, and
// WithNodeTimeout, which other backends refuse.
package redlock

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/closing"
	"github.com/redis/go-redis/v9"
)

// New returns a Backend whose Mutex is held on a majority of N
// independent Redis nodes (the Redlock algorithm). The Backend does not close
// the clients. RWMutex, Semaphore and Cond return an error matching
// baton.ErrUnsupported in this mode.
//
// Lock sends the acquisition to every node at once; it holds when a majority
// (N/2+1) agreed before the validity time ran out (TTL - elapsed - drift),
// and otherwise releases on every node and waits: for a release message from
// any node, or until the leases it found would expire (at most 100 ms). A
// refused waiter records itself on the node, and a release publishes only
// where a waiter is recorded, with their number, so an uncontended Lock and
// Unlock cost no message, and a lone waiter tries again at once. Lock
// returns as soon as a majority answered, so a paused or dead node costs no
// latency; each node gets at most the node timeout (default 50 ms, at most
// TTL/10) per request. Renewal needs a majority too. Each node draws a token from its own counter;
// the hold's token is the maximum of the majority's, and the lower counters of
// the majority are raised to it, so any later majority, which shares a node
// with this one, draws a greater token. A counter expires one TTL after the
// later of its last write and the instant its node's clock passes it, and
// a missing counter starts at the node's clock in microseconds: the shared
// node then still draws above the token, and an idle name leaves no key on
// any node.
//
// A node restarted without persistence forgets the leases it held; it
// votes for no one until it has run for a TTL, by when they have expired
// (the marker of restart.go, one key per node: prefix + "alive"; so each
// node is a single server, not a Redis Cluster).
//
// What Redlock does not guarantee: a node restarted with its marker but
// without recent writes (a lost fsync) forgets the leases given since, and
// a second client can then win a majority while the first still holds; so
// can clients with a longer TTL than the one that found the node restarted;
// a node whose clock jumps forward expires leases early, with the same
// effect; an unbounded pause of the holder (GC, SIGSTOP) outlives its lease
// whatever the algorithm. Use an odd number of nodes with persistence
// (appendfsync always) or a restart delay of one TTL. Fencing tokens are what makes these cases safe for a
// resource that remembers the highest token it accepted: the second holder's
// token is higher, and the stale holder's writes are refused.
func New(clients []redis.UniversalClient, opts ...lease.Option) (baton.Backend, error) {
	d, err := newDriver(clients, opts)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(d), nil
}

type rlDriver struct {
	nodes   []redis.UniversalClient
	o       options
	meta    string
	quorum  int
	relChan string // channel on which every node announces releases

	bg sync.WaitGroup // requests still out on slow nodes

	readyMu sync.Mutex
	recheck []time.Time // guarded by readyMu: when to check node's readiness again
	notices redisnode.Notices

	mu      sync.Mutex
	subs    []*redis.PubSub                  // guarded by mu; nil until the first wait
	waiters map[string]map[chan int]struct{} // guarded by mu: lock key -> waiting handles
	readers sync.WaitGroup
	closers []io.Closer // guarded by mu
	closed  bool        // guarded by mu
}

func newDriver(clients []redis.UniversalClient, opts []lease.Option) (*rlDriver, error) {
	if len(clients) < 3 {
		return nil, fmt.Errorf("redlock: needs at least 3 nodes, got %d: %w", len(clients), baton.ErrInvalidArgument)
	}
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redlock: node %d is nil: %w", i, baton.ErrInvalidArgument)
		}
	}
	if err := redisnode.DistinctClients(clients); err != nil {
		return nil, err
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return &rlDriver{
		nodes: slices.Clone(clients), o: o, meta: redisnode.Meta(), quorum: len(clients)/2 + 1,
		recheck: make([]time.Time, len(clients)),
		relChan: o.Prefix + "redlock:released", waiters: make(map[string]map[chan int]struct{}),
	}, nil
}

func (r *rlDriver) Kind() string                   { return "redlock" }
func (r *rlDriver) ValidateName(name string) error { return nil }

func (r *rlDriver) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	keys := append(r.keys(name), r.o.Prefix+"alive") // the marker (restart.go) last
	return &rlLock{r: r, name: name, keys: keys, relKeys: []string{keys[0], keys[2]}}, nil
}

func (r *rlDriver) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return nil, errRedlockOnly("rwmutex")
}

func (r *rlDriver) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	return nil, errRedlockOnly("semaphore")
}

func (r *rlDriver) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	return nil, errRedlockOnly("cond")
}

// errRedlockOnly is the error of the primitives Redlock mode does not serve.
func errRedlockOnly(kind string) error {
	return fmt.Errorf("redlock: serves the Mutex only, not a %s (use redislock.New on one deployment for it): %w", kind, baton.ErrUnsupported)
}

func (r *rlDriver) Close() error {
	var subs []*redis.PubSub
	var closers []io.Closer
	if !closing.First(&r.mu, &r.closed, func() {
		subs, closers = r.subs, r.closers
		r.subs = nil
	}) {
		return nil
	}
	for _, ps := range subs {
		_ = ps.Close()
	}
	r.readers.Wait()
	r.bg.Wait()
	var err error
	for _, c := range closers {
		if e := c.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// listen subscribes to the release channel of every node, once. A node that
// is down is subscribed when it comes back (go-redis reconnects); waiting
// does not depend on it, since a waiter also wakes when the leases it saw
// expire.
func (r *rlDriver) listen(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	}
	if r.subs != nil {
		return nil
	}
	r.subs = []*redis.PubSub{}
	for _, n := range r.nodes {
		// Subscribing to a paused node blocks; do it aside so that no
		// Lock waits for it. The channel is recorded even when the first
		// attempt fails, and go-redis subscribes again on reconnection.
		r.readers.Add(1)
		go func() {
			defer r.readers.Done()
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ps := n.Subscribe(sctx, r.relChan)
			cancel()
			r.mu.Lock()
			if r.closed {
				r.mu.Unlock()
				_ = ps.Close()
				return
			}
			r.subs = append(r.subs, ps)
			r.mu.Unlock()
			for m := range ps.Channel() {
				// "waiters|lock key" (rl_release.lua)
				c, key, ok := strings.Cut(m.Payload, "|")
				n, err := strconv.Atoi(c)
				if !ok || err != nil {
					continue
				}
				r.mu.Lock()
				for w := range r.waiters[key] {
					select {
					case w <- n:
					default:
					}
				}
				r.mu.Unlock()
			}
		}()
	}
	return nil
}

func (r *rlDriver) register(key string) chan int {
	w := make(chan int, 1)
	r.mu.Lock()
	m := r.waiters[key]
	if m == nil {
		m = make(map[chan int]struct{})
		r.waiters[key] = m
	}
	m[w] = struct{}{}
	r.mu.Unlock()
	return w
}

func (r *rlDriver) unregister(key string, w chan int) {
	r.mu.Lock()
	delete(r.waiters[key], w)
	if len(r.waiters[key]) == 0 {
		delete(r.waiters, key)
	}
	r.mu.Unlock()
}

// nodeReply is one node's answer to a request.
type nodeReply struct {
	node int
	v    any
	err  error
}

// fanout sends one request to every node in parallel and delivers replies on
// the returned channel (buffered for all). Each request has timeout;
// requests still running when the caller stops reading finish in the
// background (tracked by r.bg).
func (r *rlDriver) fanout(ctx context.Context, timeout time.Duration, do func(ctx context.Context, i int, c redis.UniversalClient) (any, error)) <-chan nodeReply {
	out := make(chan nodeReply, len(r.nodes))
	base := context.WithoutCancel(ctx)
	for i, c := range r.nodes {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			nctx, cancel := context.WithTimeout(base, timeout)
			defer cancel()
			v, err := do(nctx, i, c)
			out <- nodeReply{i, v, err}
		}()
	}
	return out
}
