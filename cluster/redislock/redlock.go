package redislock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

// NewRedlock returns a Backend whose Mutex is held on a majority of N
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
// with this one, draws a greater token.
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
func NewRedlock(clients []redis.UniversalClient, opts ...lease.Option) (baton.Backend, error) {
	d, err := newRedlockDriver(clients, opts)
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

	readyMu  sync.Mutex
	checking []bool      // guarded by readyMu: node's readiness check in flight
	recheck  []time.Time // guarded by readyMu: when to check node's readiness again

	mu      sync.Mutex
	subs    []*redis.PubSub                  // guarded by mu; nil until the first wait
	waiters map[string]map[chan int]struct{} // guarded by mu: lock key -> waiting handles
	readers sync.WaitGroup
	closers []io.Closer // guarded by mu
	closed  bool        // guarded by mu
}

func newRedlockDriver(clients []redis.UniversalClient, opts []lease.Option) (*rlDriver, error) {
	if len(clients) < 3 {
		return nil, fmt.Errorf("redislock: redlock needs at least 3 nodes, got %d: %w", len(clients), baton.ErrInvalidArgument)
	}
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redislock: redlock node %d is nil: %w", i, baton.ErrInvalidArgument)
		}
	}
	if err := distinctClients(clients); err != nil {
		return nil, err
	}
	o, err := buildOptions(opts, true)
	if err != nil {
		return nil, err
	}
	return &rlDriver{
		nodes: slices.Clone(clients), o: o, meta: metaOnce(), quorum: len(clients)/2 + 1,
		checking: make([]bool, len(clients)), recheck: make([]time.Time, len(clients)),
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
	return fmt.Errorf("redislock: redlock mode serves the Mutex only, not a %s (use New on one deployment for it): %w", kind, baton.ErrUnsupported)
}

func (r *rlDriver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	subs, closers := r.subs, r.closers
	r.subs = nil
	r.mu.Unlock()
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
// the returned channel (buffered for all). Each request has the node
// timeout; requests still running when the caller stops reading finish in
// the background (tracked by r.bg).
func (r *rlDriver) fanout(ctx context.Context, do func(ctx context.Context, i int, c redis.UniversalClient) (any, error)) <-chan nodeReply {
	out := make(chan nodeReply, len(r.nodes))
	base := context.WithoutCancel(ctx)
	for i, c := range r.nodes {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			nctx, cancel := context.WithTimeout(base, r.o.nodeTimeout)
			defer cancel()
			v, err := do(nctx, i, c)
			out <- nodeReply{i, v, err}
		}()
	}
	return out
}

// rlHold is the driver-private state of one Redlock grant.
type rlHold struct {
	hold
	token    int64
	released atomic.Bool // set before the release is sent
}

// rlLock serves one Mutex handle in Redlock mode.
type rlLock struct {
	r       *rlDriver
	name    string
	keys    []string // lock key, counter key, waiters key, marker (rl_acquire.lua)
	relKeys []string // lock key, waiters key: the keys of rl_release.lua
}

var _ driver.Lock = (*rlLock)(nil)

// attempt tries once to take the lock on a majority. On failure it has sent
// the release to every node and reports how long to wait before the next
// attempt. A waiter (waiter != "", the same for every attempt of one Lock)
// is recorded by every node that refused it, so that the node's next
// release is announced with the number of waiters; with again set (an
// earlier attempt was refused), a node that grants removes it.
func (l *rlLock) attempt(ctx context.Context, waiter string, again bool) (g driver.Grant, ok bool, wait time.Duration, err error) {
	r := l.r
	h := &rlHold{hold: hold{id: newID()}}
	ttl := r.o.TTL.Milliseconds()
	sent := time.Now()
	since := sent.UnixMilli()
	refused := "0"
	if again {
		refused = "1"
	}
	replies := r.fanout(ctx, func(ctx context.Context, i int, c redis.UniversalClient) (any, error) {
		v, err := acquireReply(scriptRLAcquire.Run(ctx, c, l.keys, h.id, ttl, r.meta, since, waiter, refused).Result())
		if err == nil && v[0] == 1 && h.released.Load() {
			// Taken after this attempt gave up: give it back.
			_ = scriptRLRelease.Run(ctx, c, l.relKeys, h.id, r.relChan).Err()
		}
		return v, err
	})
	var got []int                       // nodes that granted
	toks := make([]int64, len(r.nodes)) // counter drawn on each node that answered; 0 if none
	var pttls []int64                   // lease time left on nodes held by another
	var lastErr error
	fails := 0
	for range r.nodes {
		rep := <-replies
		switch {
		case rep.err != nil:
			lastErr = rep.err
			fails++
		case rep.v.([3]int64)[0] == -1:
			// The node lost its data: it may vote again once every
			// lease it gave before could have expired.
			r.checkNode(rep.node, l.keys[3])
			fails++
		default:
			v := rep.v.([3]int64)
			toks[rep.node] = v[1]
			if v[0] == 1 {
				got = append(got, rep.node)
			} else {
				pttls = append(pttls, v[2])
				fails++
			}
		}
		// Stop reading at a majority, or once a majority is out of reach.
		if len(got) >= r.quorum || fails > len(r.nodes)-r.quorum {
			break
		}
	}
	validity := r.o.TTL - time.Since(sent) - r.o.Drift
	if len(got) >= r.quorum && validity > 0 {
		tok := int64(0)
		for _, i := range got {
			tok = max(tok, toks[i])
		}
		if err := l.raise(ctx, got, toks, tok); err == nil {
			l.syncCounters(ctx, got, toks, tok)
			h.token = tok
			h.loss = driver.NewLoss()
			h.keeper = lease.StartKeeper(sent, &r.o.Config, l.renewFunc(h), h.loss, l.name)
			return driver.Grant{Token: uint64(tok), Loss: h.loss, Data: h}, true, 0, nil
		} else {
			lastErr = err
		}
	}
	l.releaseAll(ctx, h)
	pttls = slices.DeleteFunc(pttls, func(v int64) bool { return v <= 0 })
	if len(pttls) == 0 {
		// Split vote or unreachable nodes: back off briefly, at random.
		return driver.Grant{}, false, time.Duration(1+rand.IntN(10)) * time.Millisecond, lastErr
	}
	slices.Sort(pttls)
	// A release message normally ends the wait; the wait below only covers
	// a message that was missed (published before this attempt's reply was
	// read, or lost with a node's connection). Sleeping for the whole lease
	// left would let every missed message cost up to a TTL, and with many
	// contenders splitting the vote that added up to stalls of a minute.
	wait = min(time.Duration(pttls[0])*time.Millisecond, maxRedlockWait)
	return driver.Grant{}, false, wait + time.Duration(rand.IntN(3000))*time.Microsecond, nil
}

// maxRedlockWait bounds a waiter's sleep between attempts when no release
// message arrives.
const maxRedlockWait = 100 * time.Millisecond

// acquireReply reads the reply of rl_acquire.lua as {taken, counter, ms
// left on the holder's lease}.
func acquireReply(v any, err error) ([3]int64, error) {
	var out [3]int64
	if err != nil {
		return out, err
	}
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return out, fmt.Errorf("unexpected script reply %v", v)
	}
	for i := range min(len(a), 3) {
		out[i], _ = a[i].(int64)
	}
	return out, nil
}

// raise lifts the counters of the majority's nodes that drew a lower token
// than tok, until a majority of nodes has a counter >= tok.
func (l *rlLock) raise(ctx context.Context, got []int, toks []int64, tok int64) error {
	r := l.r
	have := 0
	var low []int
	for _, i := range got {
		if toks[i] == tok {
			have++
		} else {
			low = append(low, i)
		}
	}
	if have >= r.quorum {
		return nil
	}
	out := make(chan error, len(low))
	for _, i := range low {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.nodeTimeout)
			defer cancel()
			out <- scriptRLRaise.Run(nctx, r.nodes[i], l.keys[1:], tok).Err()
		}()
	}
	var lastErr error
	for range low {
		if err := <-out; err != nil {
			lastErr = err
		} else if have++; have >= r.quorum {
			return nil
		}
	}
	return fmt.Errorf("raising token counters: %w", lastErr)
}

// syncCounters raises, in the background, the counters below tok of the
// nodes that answered, except those raise already lifted. The token
// guarantee does not depend on it. It is what saves raise's second round
// trip on later acquisitions: every attempt advances the counter of every
// node it reaches (see rl_acquire.lua), so once the counters are equal they
// stay equal, every node draws the same token, and a majority agrees at
// once. They drift apart only when a node misses attempts (down, paused,
// or too slow for the node timeout) and at the start, when each counter
// began at its node's clock.
func (l *rlLock) syncCounters(ctx context.Context, got []int, toks []int64, tok int64) {
	r := l.r
	have := 0
	for _, i := range got {
		if toks[i] == tok {
			have++
		}
	}
	var low []int
	for i, t := range toks {
		// With have < quorum, raise sent to the low nodes of the majority.
		if t != 0 && t < tok && (have >= r.quorum || !slices.Contains(got, i)) {
			low = append(low, i)
		}
	}
	base := context.WithoutCancel(ctx)
	for _, i := range low {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			nctx, cancel := context.WithTimeout(base, r.o.nodeTimeout)
			defer cancel()
			_ = scriptRLRaise.Run(nctx, r.nodes[i], l.keys[1:], tok).Err()
		}()
	}
}

// releaseAll sends the release to every node and returns once a majority
// answered; the rest finish in the background. It returns how many nodes
// deleted the hold.
func (l *rlLock) releaseAll(ctx context.Context, h *rlHold) int {
	r := l.r
	h.released.Store(true)
	replies := r.fanout(ctx, func(ctx context.Context, i int, c redis.UniversalClient) (any, error) {
		return scriptRLRelease.Run(ctx, c, l.relKeys, h.id, r.relChan).Int64()
	})
	n, answered := 0, 0
	for range r.nodes {
		rep := <-replies
		if rep.err == nil {
			answered++
			if rep.v.(int64) == 1 {
				n++
			}
		}
		if answered >= r.quorum {
			break
		}
	}
	return n
}

func (l *rlLock) renewFunc(h *rlHold) lease.RenewFunc {
	r := l.r
	ttl := r.o.TTL.Milliseconds()
	return func(ctx context.Context) (time.Time, error) {
		sent := time.Now()
		replies := r.fanout(ctx, func(ctx context.Context, i int, c redis.UniversalClient) (any, error) {
			return scriptRLExtend.Run(ctx, c, l.keys, h.id, ttl, h.token).Int64()
		})
		ok, gone := 0, 0
		var lastErr error
		for range r.nodes {
			var rep nodeReply
			select {
			case rep = <-replies:
			case <-ctx.Done():
				return sent, ctx.Err()
			}
			switch {
			case rep.err != nil:
				lastErr = rep.err
			case rep.v.(int64) == 1:
				ok++
			default:
				gone++
			}
			if ok >= r.quorum {
				return sent, nil
			}
			if gone > len(r.nodes)-r.quorum {
				return sent, fmt.Errorf("a majority of nodes no longer has the hold: %w", baton.ErrLost)
			}
		}
		if lastErr == nil {
			lastErr = errors.New("no majority")
		}
		return sent, fmt.Errorf("extend: %w", lastErr)
	}
}

func (l *rlLock) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	g, ok, _, err := l.attempt(ctx, "", false)
	if ok {
		return g, nil
	}
	if err != nil {
		return driver.Grant{}, fmt.Errorf("no majority: %w", err)
	}
	return driver.Grant{}, baton.ErrLocked
}

func (l *rlLock) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if err := l.r.listen(ctx); err != nil {
		return driver.Grant{}, err
	}
	w := l.r.register(l.keys[0])
	defer l.r.unregister(l.keys[0], w)
	waiter := newID()
	for failed := 0; ; failed++ {
		if err := ctx.Err(); err != nil {
			return driver.Grant{}, err
		}
		g, ok, wait, err := l.attempt(ctx, waiter, failed > 0)
		if ok {
			return g, nil
		}
		if err != nil {
			l.r.o.Logger.Debug("redislock: redlock attempt failed", "name", l.name, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return driver.Grant{}, ctx.Err()
		case n := <-w:
			// Every waiter hears the release at once, with the number of
			// waiters the node had refused since its previous release. A
			// lone waiter tries at once. Several spread their attempts over
			// a window that doubles with each vote this one lost, so that
			// they do not split the vote again and again.
			t.Stop()
			if n > 1 || failed > 0 {
				t.Reset(time.Duration(rand.Int64N(int64(min(time.Millisecond<<min(failed, 4), 16*time.Millisecond)))))
				select {
				case <-ctx.Done():
					t.Stop()
					return driver.Grant{}, ctx.Err()
				case <-t.C:
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
}

func (l *rlLock) Release(ctx context.Context, g driver.Grant) error {
	h, ok := g.Data.(*rlHold)
	if !ok || h == nil {
		return fmt.Errorf("grant of another backend: %w", baton.ErrInvalidArgument)
	}
	h.keeper.Stop()
	deadline := h.keeper.Deadline()
	l.releaseAll(ctx, h)
	if time.Now().After(deadline) {
		h.loss.Fire(errors.New("lease deadline passed before release"))
	}
	if e := h.loss.Err(); e != nil {
		return e
	}
	return nil
}

func (l *rlLock) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, baton.ErrUnsupported
}

func (l *rlLock) Close() error { return nil }
