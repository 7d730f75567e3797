package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

// Work queues (baton.Queue). A queue is a dozen keys of one hash tag (see
// scripts/src/jobs_common.lua), none of which expires, and one script per
// operation. Claims are leases renewed by a lease.Keeper per job, like
// holds; a claim whose lease passed on the server is given back by the
// next script of the queue that looks (claim, retry, stats; not the ack,
// which reads no clock: the ack of a lapsed claim that no claim has given
// back yet is taken, its job having been nobody else's). Waiting
// claimants listen on the queue's Pub/Sub channel (the Backend's shared
// subscriptions, as Value.Wait does), with a timer to the next delayed
// job or lease deadline the claim script reported; the claim script notes
// until when they may wait, and a Put announces itself only then. The
// scripts of the common path (put, claim, ack) define the functions of the
// rest only when they need them: that costs a script more than most of
// its commands do. For the same reason each is given only the keys and
// arguments it can touch, and the server's replies it reads are numbers
// or single values where a list would do.
//
// A claim's keeper starts only when its first renewal is due: most jobs
// are acked before, and a keeper costs a claim two timers. Until then the
// claim's Loss carries the lease deadline, and one timer per handle starts
// the keepers that came due (see startKeepers).

const kjobs = "jobs"

// MaxQueuePayload is the largest payload of a job on Redis, and
// maxBatchBytes the most payload bytes one PutBatch sends in its script.
const (
	MaxQueuePayload = 1 << 20
	maxBatchBytes   = 64 << 20
)

// jobsSuffixes are the keys of a queue, in the order of jobs_common.lua;
// the ack and claim scripts are given only the first jobsKeysAck (one more
// for a job with a uniqueness key) and jobsKeysClaim of them, all they can
// touch: the server copies each key and argument of a script into the
// script, at about the cost of a command's every few.
var jobsSuffixes = []string{"inflight", "claim", "data", "info", "uniq", "ready", "delayed", "token", "dead", "reason", "waiters", "seq", "ids"}

const (
	jobsKeysAck   = 4
	jobsKeysClaim = 11
)

// jobsPutKeys are the keys the put script is given, in its order: those it
// can touch.
var jobsPutKeys = []string{"data", "info", "uniq", "ready", "delayed", "waiters", "seq", "ids"}

var (
	scriptJobsPut      = loadScript("jobs_put")
	scriptJobsClaim    = loadScript("jobs_claim")
	scriptJobsRenew    = loadScript("jobs_renew")
	scriptJobsAck      = loadScript("jobs_ack")
	scriptJobsAckMany  = loadScript("jobs_ackmany")
	scriptJobsRetry    = loadScript("jobs_retry")
	scriptJobsGiveBack = loadScript("jobs_giveback")
	scriptJobsStats    = loadScript("jobs_stats")
	scriptJobsDead     = loadScript("jobs_dead")
	scriptJobsRequeue  = loadScript("jobs_requeue")
	scriptJobsPurge    = loadScript("jobs_purge")
)

// queueDriver serves one Queue handle.
type queueDriver struct {
	d       *backend
	name    string
	keys    []string
	keyArgs []any       // keys as command arguments, made once: each costs an allocation
	putKeys []string    // the keys of the put script (jobsPutKeys)
	putArgs []any       // putKeys as command arguments
	channel string      // where puts and give-backs are announced
	calls   *queueCalls // shared with the Backend's other handles of the queue

	mu        sync.Mutex
	held      map[*jobClaim]struct{} // guarded by mu: claims not yet ended
	closed    bool                   // guarded by mu
	keepers   *time.Timer            // guarded by mu: runs startKeepers; nil until a claim needs it
	keepersAt time.Time              // guarded by mu: when keepers fires; zero when it is not armed
}

// jobClaim is the driver-private state of a claim (driver.Claim.Data).
type jobClaim struct {
	id, token string    // as the scripts know them
	key       string    // the job's uniqueness key, "" for none
	sent      time.Time // when the claim script was sent: the lease starts then
	loss      *driver.Loss
	keeper    *lease.Keeper // guarded by queueDriver.mu: nil until the first renewal is due
}

var _ driver.QueueOpener = (*backend)(nil)

// OpenQueue opens a work queue (driver.QueueOpener).
func (d *backend) OpenQueue(ctx context.Context, name string) (driver.Queue, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	base := redisnode.KeyBase(d.o.Prefix, kjobs, name)
	q := &queueDriver{d: d, name: name, keys: nameKeys(base, jobsSuffixes), channel: base + "wake", held: map[*jobClaim]struct{}{}}
	q.keyArgs = anys(q.keys)
	q.putKeys = nameKeys(base, jobsPutKeys)
	q.putArgs = anys(q.putKeys)
	q.calls = d.queues.Hold(name)
	return q, nil
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// run runs a script of the queue, as backend.run does. Without replicas
// it sends EVALSHA itself, with the keys made once, and loads the script
// when the server lacks it.
func (q *queueDriver) run(ctx context.Context, s *redis.Script, args ...any) (any, bool, error) {
	return q.runKeys(ctx, s, len(q.keys), args...)
}

// runKeys is run with the first n keys of the queue only.
func (q *queueDriver) runKeys(ctx context.Context, s *redis.Script, n int, args ...any) (any, bool, error) {
	return q.runWith(ctx, s, q.keys[:n], q.keyArgs[:n], args...)
}

// runWith is run with keys, given as command arguments too (keyArgs).
func (q *queueDriver) runWith(ctx context.Context, s *redis.Script, keys []string, keyArgs []any, args ...any) (any, bool, error) {
	if q.d.o.rep.replicas != 0 {
		return q.d.run(ctx, s, keys, args...)
	}
	n := len(keys)
	cmd := make([]any, 0, 3+n+len(args))
	cmd = append(cmd, "evalsha", s.Hash(), n)
	cmd = append(append(cmd, keyArgs...), args...)
	v, err := q.d.c.Do(ctx, cmd...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := s.Load(ctx, q.d.c).Err(); err != nil {
			return nil, false, err
		}
		v, err = q.d.c.Do(ctx, cmd...).Result()
	}
	return v, true, err
}

func (q *queueDriver) MaxPayload() int { return MaxQueuePayload }

// write runs a script that changes the queue; with WithReplicas, a write
// that too few replicas acknowledged in time is reported with
// ErrNotReplicated (it was made on the master, and a failover may lose it).
func (q *queueDriver) write(ctx context.Context, s *redis.Script, args ...any) (any, error) {
	return q.writeKeys(ctx, s, len(q.keys), args...)
}

// writeKeys is write with the first n keys of the queue only.
func (q *queueDriver) writeKeys(ctx context.Context, s *redis.Script, n int, args ...any) (any, error) {
	return q.writeWith(ctx, s, q.keys[:n], q.keyArgs[:n], args...)
}

// writeWith is write with keys, given as command arguments too (keyArgs).
func (q *queueDriver) writeWith(ctx context.Context, s *redis.Script, keys []string, keyArgs []any, args ...any) (any, error) {
	v, acked, err := q.runWith(ctx, s, keys, keyArgs, args...)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	if !acked {
		return v, fmt.Errorf("%w (%d wanted within %d ms)", ErrNotReplicated, q.d.o.rep.replicas, q.d.o.rep.waitMS)
	}
	return v, nil
}

func (q *queueDriver) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	args := make([]any, 0, 1+4*len(jobs))
	args = append(args, q.channel)
	size := 0
	for _, j := range jobs {
		size += len(j.Payload)
		var delay int64
		if !j.At.IsZero() {
			// Relative, so that the server's clock decides: clients'
			// clocks need not agree with it.
			delay = max(0, time.Until(j.At).Milliseconds())
			if delay == 0 && time.Until(j.At) > 0 {
				delay = 1
			}
		}
		args = append(args, j.Payload, j.Key, delay, j.MaxAttempts)
	}
	if size > maxBatchBytes {
		return nil, fmt.Errorf("%w: a batch of %d payload bytes, more than %d", baton.ErrInvalidArgument, size, maxBatchBytes)
	}
	v, err := q.writeWith(ctx, scriptJobsPut, q.putKeys, q.putArgs, args...)
	if v == nil {
		return nil, err
	}
	r, _ := v.([]any)
	if len(r) != len(jobs) {
		return nil, fmt.Errorf("jobs_put replied %v", v)
	}
	ids := make([]uint64, len(r))
	for i, x := range r {
		s, _ := x.(string)
		id, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("jobs_put replied id %v", x)
		}
		ids[i] = id
	}
	return ids, err
}

// renewFunc renews the lease of claim c.
func (q *queueDriver) renewFunc(c *jobClaim) lease.RenewFunc {
	ttl := q.d.ttlMS()
	return func(ctx context.Context) (time.Time, error) {
		sent := time.Now()
		v, acked, err := q.run(ctx, scriptJobsRenew, c.id, c.token, ttl)
		if err = renewed(v, err); err == nil && !acked {
			err = fmt.Errorf("renewal: %w", ErrNotReplicated)
		}
		return sent, err
	}
}

func claimOf(c driver.Claim) (*jobClaim, error) {
	jc, ok := c.Data.(*jobClaim)
	if !ok || jc == nil {
		return nil, fmt.Errorf("claim of another backend: %w", baton.ErrInvalidArgument)
	}
	return jc, nil
}

// end runs a script that ends claim c (ack, retry). The keeper stops
// first: a renewal answered after the end would report the claim lost.
// When the outcome is unknown (a network error) the claim is reported
// lost, since nothing renews it any more.
// The script is given the first nkeys keys of the queue, and the claim's
// id and token before args.
func (q *queueDriver) end(ctx context.Context, c driver.Claim, s *redis.Script, nkeys int, args ...any) error {
	return q.endWith(ctx, c, func(jc *jobClaim) (any, error) {
		return q.writeKeys(ctx, s, nkeys, append([]any{jc.id, jc.token}, args...)...)
	})
}

// endWith is end with write the script's run: its reply is 1 when the
// claim ended, 0 when the server no longer had it.
func (q *queueDriver) endWith(ctx context.Context, c driver.Claim, write func(*jobClaim) (any, error)) error {
	jc, err := claimOf(c)
	if err != nil {
		return err
	}
	q.mu.Lock()
	delete(q.held, jc)
	k := jc.keeper
	q.mu.Unlock()
	stopKeeper(jc, k)
	if err := jc.loss.Err(); err != nil {
		return err
	}
	v, err := write(jc)
	if v == nil {
		jc.loss.Fire(fmt.Errorf("the end of the claim may not have reached the server: %w", err))
		return err
	}
	if r, _ := v.(int64); r != 1 {
		jc.loss.Fire(errors.New("the server no longer had the claim"))
		return fmt.Errorf("job %s, token %s: %w", jc.id, jc.token, baton.ErrLost)
	}
	return err
}

func (q *queueDriver) Ack(ctx context.Context, c driver.Claim) error {
	return q.endWith(ctx, c, func(jc *jobClaim) (any, error) { return q.ackGathered(ctx, jc) })
}

func (q *queueDriver) Retry(ctx context.Context, c driver.Claim, at time.Time, reason string) error {
	var delay int64
	if !at.IsZero() {
		delay = max(1, time.Until(at).Milliseconds())
	}
	return q.end(ctx, c, scriptJobsRetry, len(q.keys), delay, reason, q.channel)
}

func (q *queueDriver) Stats(ctx context.Context) (driver.QueueStats, error) {
	r, err := scriptJobsStats.Run(ctx, q.d.c, q.keys).Int64Slice()
	if err != nil {
		return driver.QueueStats{}, ctxErr(ctx, err)
	}
	if len(r) != 4 {
		return driver.QueueStats{}, fmt.Errorf("jobs_stats replied %v", r)
	}
	return driver.QueueStats{Ready: int(r[0]), Delayed: int(r[1]), InFlight: int(r[2]), Dead: int(r[3])}, nil
}

func (q *queueDriver) Dead(ctx context.Context, limit int) ([]driver.DeadJob, error) {
	r, err := scriptJobsDead.Run(ctx, q.d.c, q.keys, limit).Slice()
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	if len(r)%5 != 0 {
		return nil, fmt.Errorf("jobs_dead replied %d values", len(r))
	}
	out := make([]driver.DeadJob, 0, len(r)/5)
	for i := 0; i < len(r); i += 5 {
		id, _ := r[i].(string)
		payload, _ := r[i+1].(string)
		attempts, _ := r[i+2].(int64)
		reason, _ := r[i+3].(string)
		at, _ := r[i+4].(string)
		n, err := strconv.ParseUint(id, 10, 64)
		ms, err2 := strconv.ParseFloat(at, 64)
		if err != nil || err2 != nil {
			return nil, fmt.Errorf("jobs_dead replied %v", r[i:i+5])
		}
		out = append(out, driver.DeadJob{ID: n, Payload: []byte(payload), Attempts: int(attempts), Reason: reason, At: time.UnixMilli(int64(ms))})
	}
	return out, nil
}

func (q *queueDriver) Requeue(ctx context.Context, ids []uint64) (int, error) {
	return q.byIDs(ctx, scriptJobsRequeue, ids, q.channel)
}

func (q *queueDriver) Purge(ctx context.Context, ids []uint64) (int, error) {
	return q.byIDs(ctx, scriptJobsPurge, ids)
}

func (q *queueDriver) byIDs(ctx context.Context, s *redis.Script, ids []uint64, first ...any) (int, error) {
	args := first
	for _, id := range ids {
		args = append(args, strconv.FormatUint(id, 10))
	}
	v, err := q.write(ctx, s, args...)
	n, _ := v.(int64)
	return int(n), err
}

// Close gives back the claims still held, their losses fired first.
func (q *queueDriver) Close() error {
	q.mu.Lock()
	if !q.closed {
		q.d.queues.Drop(q.name)
	}
	q.closed = true
	held := q.held
	q.held = nil
	if q.keepers != nil {
		q.keepers.Stop()
	}
	q.mu.Unlock()
	if len(held) == 0 {
		return nil
	}
	args := []any{q.channel}
	for jc := range held {
		stopKeeper(jc, jc.keeper)
		jc.loss.Fire(errors.New("the queue handle was closed"))
		args = append(args, jc.id, jc.token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.d.o.RequestTimeout)
	defer cancel()
	if _, err := q.write(ctx, scriptJobsGiveBack, args...); err != nil {
		return fmt.Errorf("giving back %d claims (they return when their lease passes): %w", len(held), err)
	}
	return nil
}

// hold records claim jc as held, its lease running from jc.sent; q.mu is
// held. Its keeper starts when its first renewal is due; until then its
// Loss carries the lease deadline, so that a read of it after the deadline
// reports the loss even if the keepers' timer runs late.
func (q *queueDriver) hold(jc *jobClaim) {
	jc.loss.SetDeadline(q.d.o.Config.Deadline(jc.sent))
	q.held[jc] = struct{}{}
	q.armKeepers(jc.sent.Add(q.d.o.RenewEvery))
}

// armKeepers makes the keepers' timer fire at at, unless it fires before;
// q.mu is held.
func (q *queueDriver) armKeepers(at time.Time) {
	if !q.keepersAt.IsZero() && !q.keepersAt.After(at) {
		return
	}
	q.keepersAt = at
	if q.keepers == nil {
		q.keepers = time.AfterFunc(time.Until(at), q.startKeepers)
		return
	}
	q.keepers.Reset(time.Until(at))
}

// startKeepers starts the keepers of the held claims whose first renewal
// is due (at once: it is due), and arms the timer for the next.
func (q *queueDriver) startKeepers() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keepersAt = time.Time{}
	if q.closed {
		return
	}
	var next time.Time
	now := time.Now()
	for jc := range q.held {
		if jc.keeper != nil {
			continue
		}
		if due := jc.sent.Add(q.d.o.RenewEvery); due.After(now) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		jc.keeper = lease.StartKeeper(jc.sent, &q.d.o.Config, q.renewFunc(jc), jc.loss, q.name)
	}
	if !next.IsZero() {
		q.armKeepers(next)
	}
}

// stopKeeper ends the lease keeping of claim jc, whose keeper is k (nil
// when none started): the deadline comes off its Loss, which fires if the
// deadline had passed, and a renewal in flight has returned.
func stopKeeper(jc *jobClaim, k *lease.Keeper) {
	if k != nil {
		k.Stop()
		return
	}
	jc.loss.SetDeadline(time.Time{})
}
