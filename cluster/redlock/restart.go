package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/redis/go-redis/v9"
)

// nodeReady is called for node i when its marker is missing (it lost its
// data, or is new; see package redisnode). It checks, in the caller's
// request, whether the node has run for a TTL, and sets the marker if so;
// a first attempt on a fresh prefix thus counts the node's vote rather than
// a refusal. It reports how much longer the node must run: 0 once the
// marker is set. A node known to need longer is not asked again before
// then.
func (r *rlDriver) nodeReady(ctx context.Context, i int, marker string) (time.Duration, error) {
	r.readyMu.Lock()
	left := time.Until(r.recheck[i])
	r.readyMu.Unlock()
	if left > 0 {
		return left, nil
	}
	left, err := redisnode.Ready(ctx, r.nodes[i], marker, r.o.TTL, redisnode.RunIDs(&r.o.Config))
	if err != nil {
		return 0, err
	}
	r.readyMu.Lock()
	r.recheck[i] = time.Now().Add(left)
	r.readyMu.Unlock()
	return left, nil
}

// restartWait is the error of an attempt that only nodes in their
// restart-safety wait refused: the nodes named by their indexes, of which
// the last to be ready waits left.
func (r *rlDriver) restartWait(nodes []int, left time.Duration) *redisnode.RestartWaitError {
	slices.Sort(nodes)
	addrs := make([]string, len(nodes))
	for k, i := range nodes {
		addrs[k] = "?"
		if oc, ok := r.nodes[i].(interface{ Options() *redis.Options }); ok {
			addrs[k] = oc.Options().Addr
		}
	}
	return &redisnode.RestartWaitError{Addr: strings.Join(addrs, ", "), Left: left}
}

// ErrRestartWait is matched (errors.Is) by the error of a TryLock refused
// only by nodes that started empty (restarted without their data, or new)
// and so vote for nobody until they have run for a TTL, as leases they may
// have given before can still run; nobody holds the lock. A Lock waits,
// says so once in the log of lease.WithLogger (at Warn), and if its
// context ends first, its error matches both the context's error and
// ErrRestartWait. It is redislock.ErrRestartWait.
var ErrRestartWait = redisnode.ErrRestartWait

// WithRunID tells the backend that the nodes whose run id (INFO server:
// run_id) is one of ids need no restart-safety wait: see
// redislock.WithRunID. URL parameter run_id, separated by commas.
func WithRunID(ids ...string) lease.Option { return redisnode.WithRunID(ids...) }

// checkNodes asks every node for a PING, once, when the backend is opened:
// a node that refuses the credentials fails the open, and so do nodes too
// few to make a majority answer; a node that is merely down for now does
// not, as Redlock works without it.
func checkNodes(ctx context.Context, nodes []*redis.Client, timeout time.Duration) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, c := range nodes {
		wg.Go(func() { errs[i] = redisnode.Check(ctx, c, c.Options().Addr, timeout) })
	}
	wg.Wait()
	var failed []string
	for _, err := range errs {
		if err == nil {
			continue
		}
		if redisnode.IsAuth(errors.Unwrap(err)) {
			return err
		}
		failed = append(failed, err.Error())
	}
	if quorum := len(nodes)/2 + 1; len(nodes)-len(failed) < quorum {
		return fmt.Errorf("%d of %d nodes answer, fewer than a majority (%d): %s",
			len(nodes)-len(failed), len(nodes), quorum, strings.Join(failed, "; "))
	}
	return nil
}
