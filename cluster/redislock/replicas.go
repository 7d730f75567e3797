package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/internal/sleep"
	"github.com/redis/go-redis/v9"
)

// Redis replicates asynchronously: a master that fails right after a grant
// can be replaced by a replica that never saw it, which then grants the
// same lock to another client. WithReplicas closes most of that window: a
// grant counts only once the given number of replicas have acknowledged
// it (WAIT on the connection that ran the granting script, in the same
// round trip), and so does each renewal.

var (
	replicasKey       = lease.NewKey[int]("redis replicas")
	replicaTimeoutKey = lease.NewKey[time.Duration]("redis replica timeout")
)

// ErrNotReplicated is the cause of an error (errors.Is) from Lock, TryLock,
// RLock and the Semaphore's Acquire when fewer replicas than WithReplicas
// asks acknowledged the grant within the replica timeout. The grant was
// given back on the server; nothing is held. A renewal that is not
// acknowledged fails with it, and is retried until the lease's deadline,
// when the hold's Loss fires. A Channel's send fails with it too, having
// sent its messages on the master all the same (see Channels in the
// package doc).
var ErrNotReplicated = errors.New("redislock: fewer replicas than required acknowledged the write")

// WithReplicas makes every grant and every renewal of a hold wait until n
// replicas of the master that served it have acknowledged the write
// (Redis WAIT), at most the replica timeout (WithReplicaTimeout). A grant
// not acknowledged in time is given back and reported with
// ErrNotReplicated, never handed out; a renewal not acknowledged counts as
// a failed renewal, so the hold's Loss fires before its lease could expire
// on a replica promoted since. It must be at least 1; without it, grants
// are not waited for. Other backends refuse it. URL parameter: replicas.
//
// What it makes safe: a failover that promotes a replica that
// acknowledged the grant (or any later write of the master) keeps the hold,
// its lease and the token counter, so no second client is granted the
// lock and tokens keep increasing. Sentinel and Redis Cluster promote the
// replica with the most replicated data, so with n equal to the number of
// replicas of each master every acknowledged grant survives the loss of the
// master. A master cut off from its replicas grants and renews nothing
// (WAIT counts the replicas still connected), so the Losses of its holders
// fire before the copies of their leases on a replica promoted meanwhile
// expire.
//
// What stays unsafe:
//   - n smaller than the number of replicas: the promoted replica can be one
//     that did not acknowledge (a replica-priority or a replica that was cut
//     off from the Sentinels, say), and forgets the grant;
//   - losing the master and every replica that acknowledged together, or a
//     replica that acknowledged and then restarted without persistence
//     before its promotion;
//   - a client of the same deployment without WithReplicas: its grants can
//     be lost in a failover, and then a client with it is granted the lock
//     while that one holds;
//   - lease expiry on a promoted replica follows that server's wall clock
//     (Redis replicates expiries as absolute times): clocks of the master
//     and its replicas must agree within the drift margin;
//   - WAIT is acknowledgement of receipt in memory, not of persistence
//     (WAITAOF is not used: it needs Redis 7.2 and AOF on every node);
//   - with n replicas, a master with fewer connected replicas grants
//     nothing: availability is traded for this guarantee.
//
// The price: each grant and renewal waits for the slowest of n replicas'
// acknowledgement (one replication round trip more, in the same client
// round trip); a waiter handed the lock by a release confirms it with one
// request of its own before Lock returns, since the releaser's write has
// to be acknowledged too.
func WithReplicas(n int) lease.Option {
	if n < 1 {
		return lease.Refuse(fmt.Errorf("%w: redis replicas %d: must be >= 1", baton.ErrInvalidArgument, n))
	}
	return replicasKey.Option(n)
}

// WithReplicaTimeout sets how long a grant or renewal waits for the
// replicas of WithReplicas to acknowledge it. Default a quarter of the
// renewal period, at most 1 s (a longer wait must also fit in the client's
// read timeout); it must be positive and at most half the renewal period,
// so that a grant acknowledged late still has the lease Lock promises.
// URL parameter: replica_timeout.
func WithReplicaTimeout(d time.Duration) lease.Option {
	if d <= 0 {
		return lease.Refuse(fmt.Errorf("%w: redis replica timeout %v: must be > 0", baton.ErrInvalidArgument, d))
	}
	return replicaTimeoutKey.Option(d)
}

// replication is what the two options set.
type replication struct {
	replicas int   // 0: no WAIT
	waitMS   int64 // WAIT timeout, ms (at least 1: 0 would block forever)
}

func buildReplication(c *lease.Config) (replication, error) {
	n, ok := replicasKey.Get(c)
	d, dok := replicaTimeoutKey.Get(c)
	if !dok {
		d = min(c.RenewEvery/4, time.Second)
	}
	if d > c.RenewEvery/2 {
		return replication{}, fmt.Errorf("%w: redis replica timeout %v: must be at most half the renewal period %v", baton.ErrInvalidArgument, d, c.RenewEvery)
	}
	if !ok {
		if dok {
			return replication{}, fmt.Errorf("%w: redis replica timeout without replicas", baton.ErrInvalidArgument)
		}
		return replication{}, nil
	}
	return replication{replicas: n, waitMS: max(1, d.Milliseconds())}, nil
}

// run runs a script that may grant or renew. Without replicas it is the
// script alone (acked is true). With replicas, the script and a WAIT go in
// one pipeline on one connection of the master that serves keys[0] (WAIT
// counts the acknowledgements of that connection's writes), and acked
// reports whether enough replicas acknowledged.
func (d *backend) run(ctx context.Context, s *redis.Script, keys []string, args ...any) (v any, acked bool, err error) {
	if d.o.rep.replicas == 0 {
		v, err = s.Run(ctx, d.c, keys, args...).Result()
		return v, true, err
	}
	for attempt := 0; ; attempt++ {
		v, acked, err = d.runWait(ctx, s, keys, args)
		if err == nil || attempt >= 50 || !d.retryable(ctx, err) {
			return v, acked, err
		}
		// A slot moving between Cluster masters: go-redis follows the
		// redirection for lone commands; this pipeline goes to one node,
		// so it follows it itself.
		if err := sleep.For(ctx, time.Duration(min(attempt+1, 10))*time.Millisecond); err != nil {
			return nil, false, err
		}
	}
}

func (d *backend) runWait(ctx context.Context, s *redis.Script, keys []string, args []any) (any, bool, error) {
	var node redis.Cmdable = d.c
	if cc, ok := d.c.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, false, err
		}
		node = n
	}
	for loaded := false; ; loaded = true {
		p := node.Pipeline()
		ev := s.EvalSha(ctx, p, keys, args...)
		w := p.Do(ctx, "wait", d.o.rep.replicas, d.o.rep.waitMS)
		_, _ = p.Exec(ctx)
		v, err := ev.Result()
		if err != nil && !loaded && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := s.Load(ctx, node).Err(); err != nil {
				return nil, false, err
			}
			continue
		}
		if err != nil {
			return nil, false, err
		}
		n, err := w.Int64()
		if err != nil {
			return nil, false, fmt.Errorf("WAIT: %w", err)
		}
		return v, n >= int64(d.o.rep.replicas), nil
	}
}

// retryable reports whether err is a Cluster redirection or a slot in
// migration, after which the node of the keys is looked up again.
func (d *backend) retryable(ctx context.Context, err error) bool {
	cc, ok := d.c.(*redis.ClusterClient)
	if !ok || ctx.Err() != nil {
		return false
	}
	s := err.Error()
	for _, p := range []string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.HasPrefix(s, p) {
			if p == "MOVED " {
				cc.ReloadState(ctx)
			}
			return true
		}
	}
	return false
}

// notReplicated is the error of a grant that was not acknowledged.
func (d *backend) notReplicated() error {
	return fmt.Errorf("%w (%d wanted within %d ms); the grant was given back", ErrNotReplicated, d.o.rep.replicas, d.o.rep.waitMS)
}
