// Package redislock is the Redis backend of baton: the same Mutex, RWMutex,
// Semaphore, Cond and Channel as on one host, served by Redis through Lua
// scripts.
//
// New takes any redis.UniversalClient: a single node, a Sentinel failover
// client or a Redis Cluster client. Every key of one name carries the same
// hash tag, so every script runs on one Cluster slot. OpenURL builds the
// client and the Backend from a URL (redis://, redis+cluster://,
// redis+sentinel://), NewSentinel from go-redis' failover options. A Mutex
// held on a majority of independent nodes (Redlock) is package redlock's.
//
// # Failover
//
// Redis replicates asynchronously. Without WithReplicas, a master that
// fails right after a grant can be replaced by a replica that never saw it
// and grants the lock to another client, with the same fencing token; the
// first holder learns of it at its next renewal. WithReplicas(n) (URL
// parameter replicas=n) makes each grant and renewal wait, in the same
// round trip, until n replicas acknowledged it (WAIT); see its godoc for
// what stays unsafe. Waiters on a Redis Cluster are woken by Pub/Sub
// messages, which the Cluster delivers from any node to a subscriber on any
// other, so a slot that moves or fails over keeps its waiters; a message
// lost meanwhile is made up for by the waiter's check-in every renewal
// period.
//
// # Holds and leases
//
// New and OpenURL take the options of package lease, the same as every
// lease backend's.
//
// Every hold is a lease of the TTL (lease.WithTTL, default 10 s) that is
// renewed in the background every renewal period (default TTL/3). If renewal fails until the local deadline
// (send time of the last successful request + TTL - drift margin, on the
// monotonic clock), the hold's Loss fires; it fires before the server lets
// the lease expire. A process that dies stops renewing: its locks and
// permits come back after at most the TTL. Lock never returns a lease with
// less left than TTL - RenewEvery - drift (what a kept lease has just
// before each renewal): a grant whose reply came later than a renewal
// period after its request is confirmed on the server first. Unlock and the
// renewal goroutine compare the hold's unique id on the server, so a lost
// hold never deletes another holder's lock; Unlock of a lost hold returns
// baton.ErrLost.
//
// # Fairness and handoff
//
// Waiters queue on the server in FIFO order. A release hands the lock
// directly to the head of the queue inside the release script and wakes that
// waiter with a Pub/Sub message: a handoff takes one round trip, and no
// waiter polls. Queue entries are leases too (refreshed by the waiting
// client every RenewEvery), so a waiter that dies never blocks the queue for
// longer than the TTL. A waiter whose context ends removes its entry. The
// periodic refresh also catches a wake-up message lost when the Pub/Sub
// connection broke. Readers and writers share one queue, which makes the
// RWMutex writer-preferring: a reader arriving after a queued writer waits.
//
// Handles of one Backend wanting the same Mutex wait for each other in the
// Backend, FIFO, and only one of them at a time talks to the server; a
// handle that unlocks while another handle of its Backend waits passes it
// the hold, lease and all, with no round trip (the Mutex driver implements
// driver.Passer; the core keeps the line). A hold goes round one Backend
// at most 15 times and for at most 5 ms after it was taken on the server;
// then it is released there, and the server's queue (other clients first,
// if they wait) decides who is next. So goroutines of one
// process contending on a name cost the server one acquisition per round,
// and clients elsewhere wait at most one round more than with strict FIFO.
//
// # Stored format of the Mutex's waiters
//
// A Mutex keeps its waiters in a list of entries in arrival order (key
// suffix "line") beside a sorted set of their expiries ("lexp") and a key
// that says anyone may wait ("lwait"); earlier versions kept them in two
// sorted sets, a hash and a sequence ("queue", "qexp", "qdata", "seq"). The
// hold ("owner") and the token counter ("counter") are as they were, so a
// process of an earlier version and one of this version on the same name
// still exclude each other and draw increasing tokens: neither can hold
// while the other does. What they do not share is the waiters: a release
// by one does not hand the lock to a waiter of the other, which takes it
// at its next check-in (every renewal period) unless someone takes it
// first. Upgrade all clients of a name together for FIFO order.
//
// # Fencing tokens
//
// Exclusive holds draw a token from a per-name counter in the acquire
// script. A counter that does not exist starts at the server's clock in
// microseconds, so tokens keep increasing across a restart of a server that
// lost its data, unless that server's clock went back. Read holds carry the
// current counter value; semaphore permits carry 0. A Mutex acquisition on
// the server advances the counter by 16 and takes its value; a hold passed
// within a Backend takes the next of the 15 tokens above it. So the counter
// (the last token inspection shows) is the token of the last acquisition on
// the server, and a hold passed on holds a token up to 15 above it. (The
// counter stays behind the server's clock, and the restart guarantee holds,
// while a name is taken on the server fewer than 62,500 times a second.)
//
// The counter is not kept forever: each grant sets it to expire one TTL
// after the later of now and the instant the server clock passes the last
// token it reserved. So an idle name leaves no key a TTL after its last
// grant (later, if it was taken faster than the clock), and tokens still
// increase across that: while the key exists the next token is above it,
// and once it is gone the server clock, where a new counter starts, is past
// every token it gave. Across a failover the expiry is an absolute time,
// replicated with the key, so a promoted replica keeps the counter until
// its own clock is past the tokens too; only a counter the old master had
// already expired and deleted can start again below them, and only if the
// new master's clock is behind the old one's by more than a TTL, which
// would end leases early anyway.
//
// # A server that loses its data
//
// A server restarted without persistence forgets the leases it gave and
// would grant them again at once, while their holders still trust them.
// Acquisitions therefore grant only while a marker key exists, which such
// a restart loses with everything else: prefix + "alive" on a single node,
// one prefix + "alive:{tag}" per hash slot on a Redis Cluster (a script may
// touch the keys of one slot only). Checking it is one EXISTS inside the
// acquire script. A script that finds it missing grants nothing and changes
// nothing; the client then reads the server's uptime (INFO, on this path
// only) and sets the marker once the server has run for a whole TTL, by
// when every lease given before the restart has expired. Until then Lock
// waits, and TryLock returns an error matching baton.ErrLocked. A new server
// cannot be told apart from one that lost its data: grants wait until it
// has run for a TTL (on a server started long before its first use, that
// costs one INFO and one SET per marker, once). An operator who knows that
// a server never gave a lease may set the marker by hand.
//
// What this does not cover: the wait is this client's TTL, so it assumes
// that no client of the server uses a longer one; a restart that keeps the
// marker but loses recent writes (an RDB snapshot, an AOF without
// appendfsync always), a FLUSHALL or FLUSHDB, and a failover to a replica
// that had not received the latest writes (unless WithReplicas makes every
// grant wait for the replicas) are not detected; the
// uptime is counted by the server's wall clock. Fencing tokens still
// increase across all of these (see Fencing tokens).
//
// # Versioned values
//
// A Value is one hash per name (version and data) with no expiry.
// CompareAndSwap is one script: it compares the version, writes, and
// publishes the new version on the name's channel; Load is one HMGET.
// Wait subscribes to the name's channel (one Pub/Sub connection per
// Backend carries every channel its handles wait on, made by the first
// Wait), reads the value once subscribed, and reads again on each message,
// and every renewal period in case a message was lost with a broken
// connection. A new version is the old one + 1 or the server's clock in
// microseconds, whichever is greater. A server that loses its data (a
// restart without persistence, a FLUSHALL, a failover to a replica that
// missed the last writes) loses the value with it: Load then reports it
// never written (version 0) or an older write. Versions given after the
// loss are still above every version given before, unless the server's
// clock went back (or, after a failover, the new primary's clock is behind
// the old one's by more than the time since the lost write), so a
// CompareAndSwap against a version read before the loss fails with
// ErrConflict rather than overwriting data its caller never saw.
//
// # Work queues
//
// A Queue is a dozen keys of one hash tag (one Cluster slot) and one Lua
// script per operation. Ready jobs are claimed in the order they became
// ready, except that a job given back (its claimant's handle closed, or
// its lease passed) returns to the place it had. A claim is a lease of the
// TTL, renewed in the background like a hold, and its Loss fires before
// the lease passes on the server; the next claim (or retry, or stats) of
// the queue after that gives the job back. An ack reads no clock: the ack
// of a claim whose lease passed but that no claim gave back yet is taken,
// since no other claimant had its job. Waiting claimants are woken by Pub/Sub
// messages, and by a timer to the next delayed job or lease deadline.
// The Claims and Acks of one queue's handles in one Backend that come
// while a claim or ack script of theirs runs are gathered into the next
// one, which serves them all (jobs_gather.go).
// Tokens come from the queue's counter, which never expires (none of a
// queue's keys does). Payloads are at most MaxQueuePayload bytes, a
// PutBatch at most 64 MiB of them. With WithReplicas, every write of a
// queue waits for the replicas; one not acknowledged returns
// ErrNotReplicated (a claim then gives its jobs back). Without it, a
// failover can lose recent puts, acks, claims and tokens. Processes of
// earlier versions may share a queue with this one: the keys and what they
// hold are as they were, and each process runs its own version of the
// scripts (what the claim script returns and the order in which the
// scripts take the keys are between a process and its scripts). Acks of
// earlier versions give lapsed claims back, those of this one leave them
// to the next claim of either version, which gives them back before it
// takes a job: a job still has one live claimant at most, and a late ack
// of a claim given back is refused by both (TestQueueMixedVersions).
// # Channels
//
// A Channel is a list of messages and a hash of its parameters on the
// name's hash tag, pushed and popped by scripts that never block on the
// server; a sender of a full channel or a receiver of an empty one sleeps
// on a Pub/Sub message (see channel.go). It has no expiry: it lasts until
// removed. What a failure loses: a failover can lose the sends a master
// acknowledged last and give again messages it had handed out, since
// Redis replicates asynchronously (WithReplicas makes each send and
// receive wait for n replicas; a send they did not acknowledge returns
// ErrNotReplicated, its messages sent on the master all the same); a
// restart without persistence, or a FLUSHALL, loses the channel, and its
// handles then fail with an error matching baton.ErrLost; a receiver that
// dies with a reply in flight loses what it carried. SendFunc and RecvInto
// copy. A SendBatch goes in requests of at most 1024 messages and 8 MiB,
// a RecvBatch takes at most that much in one.
//
// # What failures leave behind
//
// Each name uses a handful of keys under the prefix (default "baton:"); they
// expire one second after the last lease or queue entry ends (a Mutex's hold
// key with its lease; a Mutex's queue keys, whose expiry arrivals extend by
// a TTL at a time, up to a TTL later), a semaphore's capacity with them (a
// handle opened later may then store another capacity, and the handles of
// the old one find theirs mismatched), and the token counter as Fencing tokens says. What
// stays whatever the names used is values, which hold data, queues (whose
// token counters must not start again while a queue exists), and the
// markers (see above): one per server, or per hash slot of a Cluster.
//
// A Mutex keeps its hold in one key whose expiry is the lease, so that an
// uncontended Lock and Unlock are one short script each (five commands, two
// of them writes, and three, one a write; the clock is read for the
// counter's expiry); the start of such a hold, as
// inspection shows it, is the client's clock. An RWMutex keeps its holders
// in a sorted set. A call that fails on
// the network returns the error; a hold it may have taken expires with its
// lease.
//
// # Inspection
//
// The Backend implements baton.Inspector (for the baton command's status,
// ls and rm). List scans the keys under the prefix, on every master of a
// Redis Cluster; Inspect reads a name's holders (pid, host, start, token,
// lease time left), live queue entries, capacity and last token in one
// script; Remove deletes every key of a name, and its holders find their
// hold lost at their next renewal.
//
// Clients: a waiting handle uses no pooled connection (waiting is Pub/Sub on
// one connection per Backend). Set ContextTimeoutEnabled on the client so
// that a request to an unresponsive server ends with the caller's context;
// OpenURL does.
package redislock

import (
	"context"
	"embed"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/batch"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/closing"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the default key prefix, that of every Redis backend.
const DefaultPrefix = redisnode.DefaultPrefix

// options is what New and OpenURL make of their lease.Options.
type options struct {
	lease.Config
	rep replication // WithReplicas (replicas.go)
}

func buildOptions(opts []lease.Option) (options, error) {
	c, err := redisnode.Config(opts, replicasKey, replicaTimeoutKey)
	if err != nil {
		return options{}, err
	}
	rep, err := buildReplication(&c)
	if err != nil {
		return options{}, err
	}
	return options{Config: c, rep: rep}, nil
}

// The scripts in scripts/ run as they are written. Those of the Mutex,
// RWMutex, Semaphore and Cond share functions, so they are assembled from
// the parts in scripts/src (package internal/luagen); TestScriptsGenerated
// fails when they are stale.
//
//go:generate go run gen_scripts.go
//go:embed scripts/*.lua
var scriptFS embed.FS

func loadScript(name string) *redis.Script { return redisnode.Script(scriptFS, name) }

var (
	scriptMutexAcquire  = loadScript("mutex_acquire")
	scriptMutexPoll     = loadScript("mutex_poll")
	scriptMutexCancel   = loadScript("mutex_cancel")
	scriptMutexRelease  = loadScript("mutex_release")
	scriptMutexRenew    = loadScript("mutex_renew")
	scriptLockAcquire   = loadScript("lock_acquire")
	scriptLockPoll      = loadScript("lock_poll")
	scriptLockCancel    = loadScript("lock_cancel")
	scriptLockRelease   = loadScript("lock_release")
	scriptLockDowngrade = loadScript("lock_downgrade")
	scriptRenew         = loadScript("renew")
	scriptSemOpen       = loadScript("sem_open")
	scriptSemAcquire    = loadScript("sem_acquire")
	scriptSemPoll       = loadScript("sem_poll")
	scriptSemCancel     = loadScript("sem_cancel")
	scriptSemRelease    = loadScript("sem_release")
	scriptCondPrepare   = loadScript("cond_prepare")
	scriptCondPoll      = loadScript("cond_poll")
	scriptCondCancel    = loadScript("cond_cancel")
	scriptCondSignal    = loadScript("cond_signal")
	scriptInspect       = loadScript("inspect")
)

// New returns a Backend on one Redis deployment reached through client: a
// single node (redis.Client), a Sentinel failover client, or a Redis Cluster
// (redis.ClusterClient). The Backend does not close client.
//
// A replicated deployment (Sentinel, Cluster) replicates asynchronously: a
// lock granted by a master that fails before replicating it can be granted
// again by the promoted replica, with the same token. WithReplicas makes
// every grant and renewal wait for replicas' acknowledgement; its godoc
// says what that covers and what it leaves unsafe.
func New(client redis.UniversalClient, opts ...lease.Option) (baton.Backend, error) {
	d, err := newDriver(client, opts)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(d), nil
}

type backend struct {
	c    redis.UniversalClient
	o    options
	meta string
	wake string // this backend's wake-up channel
	// The Mutex scripts' constant arguments, boxed once rather than at
	// every request: ttl ms, meta, wake.
	ttlArg, metaArg, wakeArg any
	n                        *notifier
	// cluster: c is a Redis Cluster client, with a marker per hash slot
	// (restart.go).
	cluster bool

	idPrefix string        // random, ends with '.'; see holdID
	idSeq    atomic.Uint64 // sequence of holdID

	closeMu sync.Mutex
	closers []io.Closer // guarded by closeMu: clients OpenURL created
	closed  bool        // guarded by closeMu

	alive   string            // the marker key of a single node (restart.go)
	notices redisnode.Notices // of the restart-safety waits (restart.go)

	vals *valueSubs // guarded by closeMu; made by the first Value Wait

	queues batch.Shared[queueCalls] // what the handles of a queue share, by name
}

func newDriver(client redis.UniversalClient, opts []lease.Option) (*backend, error) {
	if client == nil {
		return nil, fmt.Errorf("redislock: nil client: %w", baton.ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	d := &backend{c: client, o: o, meta: redisnode.Meta(), idPrefix: redisnode.NewID() + "."}
	d.wake = o.Prefix + "wake:" + redisnode.NewID()
	d.ttlArg, d.metaArg, d.wakeArg = d.ttlMS(), d.meta, d.wake
	_, d.cluster = client.(*redis.ClusterClient)
	d.alive = o.Prefix + "alive"
	d.n = newNotifier(client, d.wake, o.Logger)
	return d, nil
}

func (d *backend) Kind() string { return "redis" }

func (d *backend) ValidateName(name string) error { return nil }

func (d *backend) ttlMS() int64 { return d.o.TTL.Milliseconds() }

func (d *backend) checkOpen() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return fmt.Errorf("redislock: %w", baton.ErrClosed)
	}
	return nil
}

func (d *backend) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return &mutexDriver{queued{d: d, name: name, keys: newKeySet(d.o.Prefix, kmutex, name, mutexSuffixes, d.markerKey(name)), s: mutexKind}}, nil
}

func (d *backend) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return &rwDriver{queued{d: d, name: name, keys: newKeySet(d.o.Prefix, krw, name, lockSuffixes, d.markerKey(name)), s: rwKind}}, nil
}

func (d *backend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	s := &semDriver{d: d, name: name, keys: newKeySet(d.o.Prefix, ksem, name, semSuffixes, d.markerKey(name)), capacity: permits}
	r, err := scriptSemOpen.Run(ctx, d.c, s.keys.all(), permits).Int64()
	if err != nil {
		return nil, err
	}
	if r < 0 {
		return nil, fmt.Errorf("it exists with another capacity than %d: %w", permits, baton.ErrMismatch)
	}
	return s, nil
}

func (d *backend) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	return &condDriver{d: d, name: name, keys: newKeySet(d.o.Prefix, kcond, name, condSuffixes, "")}, nil
}

func (d *backend) Close() error {
	var closers []io.Closer
	if !closing.First(&d.closeMu, &d.closed, func() { closers = d.closers }) {
		return nil
	}
	err := d.n.close()
	if e := d.closeValues(); e != nil && err == nil {
		err = e
	}
	for _, c := range closers {
		if e := c.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// cleanupCtx gives a request that undoes a step (withdraw a queue entry) a
// short time of its own, after the caller's context ended.
func (d *backend) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), min(d.o.TTL/4, 500*time.Millisecond, d.o.RequestTimeout))
}
