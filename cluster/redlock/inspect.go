package redlock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

// In Redlock mode the Inspector asks every node and reports what a majority
// says: List names every mutex with a key on any node that answered;
// Inspect reports a holder only when a majority of nodes has the same hold,
// with the lease time the majority still grants. The holder's token is not
// kept on the nodes (it is the maximum of the majority's counters when it
// was drawn) and is reported as 0; LastToken is the highest counter among
// the nodes. Waiters keep no state on the nodes: Waiters is -1. Every call
// needs answers from a majority.

// inspectTimeout bounds one node's answer to an inspection.
const inspectTimeout = 2 * time.Second

// eachNode runs do on every node in parallel and returns the answers (nil
// for nodes that failed or did not answer in time) and how many answered.
// Once a majority has answered it waits at most the node timeout for the
// others, which finish in the background (a dead node's client retries its
// dial for a long time).
func (r *rlDriver) eachNode(ctx context.Context, do func(ctx context.Context, c redis.UniversalClient) (any, error)) ([]any, int, error) {
	replies := r.fanout(ctx, inspectTimeout, func(ctx context.Context, _ int, c redis.UniversalClient) (any, error) {
		return do(ctx, c)
	})
	out := make([]any, len(r.nodes))
	ok := 0
	var lastErr error
	var grace <-chan time.Time
collect:
	for range r.nodes {
		select {
		case rep := <-replies:
			if rep.err != nil {
				lastErr = rep.err
				continue
			}
			out[rep.node] = rep.v
			if ok++; ok == r.quorum {
				t := time.NewTimer(r.o.nodeTimeout)
				defer t.Stop()
				grace = t.C
			}
		case <-grace:
			break collect
		case <-ctx.Done():
			lastErr = ctx.Err()
			break collect
		}
	}
	if ok < r.quorum {
		if lastErr == nil {
			lastErr = errors.New("no majority")
		}
		return nil, ok, fmt.Errorf("%d of %d nodes answered, %d needed: %w", ok, len(r.nodes), r.quorum, lastErr)
	}
	return out, ok, nil
}

func (r *rlDriver) checkKind(kind baton.Kind) error {
	switch kind {
	case baton.KindRWMutex, baton.KindSemaphore, baton.KindCond:
		return errRedlockOnly(string(kind))
	case baton.KindMutex:
	default:
		return fmt.Errorf("kind %q: want mutex, rwmutex, semaphore or cond: %w", kind, baton.ErrInvalidArgument)
	}
	return nil
}

// List returns every mutex with a key on a node that answered.
func (r *rlDriver) List(ctx context.Context) ([]baton.Info, error) {
	pattern := redisnode.GlobEscape(r.o.Prefix+keyKind+":") + "*"
	got, _, err := r.eachNode(ctx, func(ctx context.Context, c redis.UniversalClient) (any, error) {
		return redisnode.ScanKeys(ctx, c, pattern)
	})
	if err != nil {
		return nil, fmt.Errorf("redlock: redlock list: %w", err)
	}
	var keys []string
	for _, v := range got {
		k, _ := v.([]string)
		keys = append(keys, k...)
	}
	mutexOnly := func(kk string) (baton.Kind, bool) { return baton.KindMutex, kk == keyKind }
	return redisnode.InspectKeys(ctx, r.o.Prefix, keys, mutexOnly, r.Inspect)
}

func (r *rlDriver) keys(name string) []string {
	b := redisnode.KeyBase(r.o.Prefix, keyKind, name)
	return []string{b + "lock", b + "counter", b + "waiting"}
}

// Inspect asks every node about one mutex and reports the majority's view
// (see above). Other kinds return an error matching baton.ErrUnsupported.
func (r *rlDriver) Inspect(ctx context.Context, kind baton.Kind, name string) (baton.Info, error) {
	if err := r.checkKind(kind); err != nil {
		return baton.Info{}, err
	}
	keys := r.keys(name)
	got, answered, err := r.eachNode(ctx, func(ctx context.Context, c redis.UniversalClient) (any, error) {
		return scriptInspect.Run(ctx, c, keys).Slice()
	})
	if err != nil {
		return baton.Info{}, fmt.Errorf("redlock: redlock inspect %q: %w", name, err)
	}
	type seenHold struct {
		value string
		ttls  []int64
	}
	holds := map[string]*seenHold{}
	exists := false
	in := baton.Info{Name: name, Kind: kind, Backend: r.Kind(), Impl: "redlock", Holders: []baton.Holder{}, Waiters: -1}
	for _, v := range got {
		a, _ := v.([]any)
		if len(a) != 3 {
			continue
		}
		val, _ := a[0].(string)
		pttl, _ := a[1].(int64)
		ctr, _ := a[2].(string)
		if val != "" || ctr != "" {
			exists = true
		}
		if n, err := strconv.ParseUint(ctr, 10, 64); err == nil {
			in.LastToken = max(in.LastToken, baton.Token(n))
		}
		if val == "" || pttl <= 0 {
			continue
		}
		id, _, _ := strings.Cut(val, "|")
		h := holds[id]
		if h == nil {
			h = &seenHold{value: val}
			holds[id] = h
		}
		h.ttls = append(h.ttls, pttl)
	}
	if !exists {
		return baton.Info{}, fmt.Errorf("redlock: mutex %q: %w", name, fs.ErrNotExist)
	}
	in.Detail = fmt.Sprintf("%s (%d of %d nodes answered)", redisnode.KeyBase(r.o.Prefix, keyKind, name), answered, len(r.nodes))
	for _, h := range holds {
		if len(h.ttls) < r.quorum {
			continue
		}
		// The majority holds until its quorum-th longest lease ends.
		slices.Sort(h.ttls)
		slices.Reverse(h.ttls)
		hd := baton.Holder{Mode: driver.Exclusive.String(), TTL: time.Duration(h.ttls[r.quorum-1]) * time.Millisecond}
		f := strings.SplitN(h.value, "|", 3)
		if len(f) == 3 {
			if ms, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				hd.Since = time.UnixMilli(ms)
			}
			redisnode.ParseMeta(f[2], &hd)
		}
		in.Holders = append(in.Holders, hd)
	}
	return in, nil
}

// Remove deletes the mutex's keys on every node; it needs a majority of
// nodes to answer. A holder finds its hold gone at its next renewal.
func (r *rlDriver) Remove(ctx context.Context, kind baton.Kind, name string) error {
	if err := r.checkKind(kind); err != nil {
		return err
	}
	keys := r.keys(name)
	got, _, err := r.eachNode(ctx, func(ctx context.Context, c redis.UniversalClient) (any, error) {
		return c.Del(ctx, keys...).Result()
	})
	if err != nil {
		return fmt.Errorf("redlock: redlock remove %q: %w", name, err)
	}
	var n int64
	for _, v := range got {
		d, _ := v.(int64)
		n += d
	}
	if n == 0 {
		return fmt.Errorf("redlock: mutex %q: %w", name, fs.ErrNotExist)
	}
	return nil
}
