package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

// rlHold is the driver-private state of one Redlock grant.
type rlHold struct {
	id       string
	keeper   *lease.Keeper
	loss     *driver.Loss
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
	h := &rlHold{id: redisnode.NewID()}
	ttl := r.o.TTL.Milliseconds()
	sent := time.Now()
	since := sent.UnixMilli()
	refused := "0"
	if again {
		refused = "1"
	}
	replies := r.fanout(ctx, r.o.nodeTimeout, func(ctx context.Context, i int, c redis.UniversalClient) (any, error) {
		v, err := acquireReply(scriptAcquire.Run(ctx, c, l.keys, h.id, ttl, r.meta, since, waiter, refused).Result())
		if err == nil && v[0] == -1 {
			// The node lost its data or is new: it votes once it has run
			// for a TTL, which is checked now, not after a refusal.
			left, rerr := r.nodeReady(ctx, i, l.keys[3])
			switch {
			case rerr != nil:
				return v, rerr
			case left == 0:
				v, err = acquireReply(scriptAcquire.Run(ctx, c, l.keys, h.id, ttl, r.meta, since, waiter, refused).Result())
			default:
				v[2] = left.Milliseconds()
			}
		}
		if err == nil && v[0] == 1 && h.released.Load() {
			// Taken after this attempt gave up: give it back.
			_ = scriptRelease.Run(ctx, c, l.relKeys, h.id, r.relChan).Err()
		}
		return v, err
	})
	var got []int                       // nodes that granted
	toks := make([]int64, len(r.nodes)) // counter drawn on each node that answered; 0 if none
	var pttls []int64                   // lease time left on nodes held by another
	var waiting []int                   // nodes in their restart-safety wait
	var waitLeft time.Duration          // the longest of their waits
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
			waiting = append(waiting, rep.node)
			waitLeft = max(waitLeft, time.Duration(rep.v.([3]int64)[2])*time.Millisecond)
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
	if len(pttls) == 0 && len(waiting) > 0 && lastErr == nil {
		// Refused by no holder: only by nodes that must wait out
		// the leases they may have given before they lost their data.
		return driver.Grant{}, false, waitLeft, r.restartWait(waiting, waitLeft)
	}
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
			out <- scriptRaise.Run(nctx, r.nodes[i], l.keys[1:], tok, r.o.TTL.Milliseconds()).Err()
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
			_ = scriptRaise.Run(nctx, r.nodes[i], l.keys[1:], tok, r.o.TTL.Milliseconds()).Err()
		}()
	}
}

// releaseAll sends the release to every node and returns once a majority
// answered; the rest finish in the background. It returns how many nodes
// deleted the hold.
func (l *rlLock) releaseAll(ctx context.Context, h *rlHold) int {
	r := l.r
	h.released.Store(true)
	replies := r.fanout(ctx, r.o.nodeTimeout, func(ctx context.Context, i int, c redis.UniversalClient) (any, error) {
		return scriptRelease.Run(ctx, c, l.relKeys, h.id, r.relChan).Int64()
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
		replies := r.fanout(ctx, r.o.nodeTimeout, func(ctx context.Context, i int, c redis.UniversalClient) (any, error) {
			return scriptExtend.Run(ctx, c, l.keys, h.id, ttl, h.token).Int64()
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
	if errors.Is(err, redisnode.ErrRestartWait) {
		return driver.Grant{}, err
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
	waiter := redisnode.NewID()
	var restart *redisnode.RestartWaitError // the wait the last attempt met, if any
	for failed := 0; ; failed++ {
		if ctx.Err() != nil {
			return driver.Grant{}, redisnode.CtxErr(ctx, restart)
		}
		g, ok, wait, err := l.attempt(ctx, waiter, failed > 0)
		if ok {
			return g, nil
		}
		restart = nil
		switch {
		case errors.As(err, &restart):
			l.r.notices.Tell(l.r.o.Logger, restart)
		case err != nil:
			l.r.o.Logger.Debug("redlock: redlock attempt failed", "name", l.name, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return driver.Grant{}, redisnode.CtxErr(ctx, restart)
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
					return driver.Grant{}, redisnode.CtxErr(ctx, restart)
				case <-t.C:
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
}

func (l *rlLock) Release(ctx context.Context, g driver.Grant) error {
	h, err := driver.DataOf[rlHold](g)
	if err != nil {
		return err
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
