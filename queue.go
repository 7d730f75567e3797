package baton

import (
	"context"
	"errors"
	"time"
)

// KindQueue names work queues in errors and listings.
const KindQueue Kind = "queue"

// Limits of work queues on every backend (each backend states its payload
// limit and capacity in its own documentation; see Queue.MaxPayload).
const (
	// DefaultMaxAttempts is how many times a job is claimed, unless
	// MaxAttempts says otherwise, before it becomes a dead letter.
	DefaultMaxAttempts = 25
	// MaxJobAttempts is the largest MaxAttempts.
	MaxJobAttempts = 1 << 20
	// MaxJobKeyLen is the longest uniqueness key, in bytes.
	MaxJobKeyLen = 128
	// MaxBatch is the most jobs one PutBatch or ClaimBatch handles.
	MaxBatch = 1000
	// MaxReasonLen is the longest reason a dead letter keeps, in bytes;
	// Fail cuts longer ones (at a character boundary).
	MaxReasonLen = 256
)

var (
	// ErrEmpty is returned by TryClaim when no job is ready.
	ErrEmpty = errors.New("baton: queue empty")
	// ErrFull is returned by Put and PutBatch when the queue has no room
	// for the jobs (see the backend's capacity); nothing was added.
	ErrFull = errors.New("baton: queue full")
)

// JobID identifies a job within its queue. Ids are given in increasing
// order and not reused while the queue lasts.
type JobID uint64

// Queue is a named work queue shared by the processes that open the same
// name on the same backend: producers Put jobs, workers Claim them, do
// them, and Ack them.
//
// Guarantees, on every backend that serves queues:
//
//   - At-least-once: a job put is claimed until a claimant Acks it (or it
//     becomes a dead letter). A claimant that dies, or whose claim is lost,
//     gives its job back; the job is then claimed again, and the effect of
//     the first claimant may or may not have happened.
//   - One live claimant at a time: a claim is a lease (see Job), and a
//     claim that is lost is reported lost (Job.Lost, Job.Err) before the
//     job is given to anyone else. Every claim carries a fencing token
//     greater than every token the queue gave before, so a resource
//     guarded by package fence refuses the effect of a stale claimant,
//     and a job's effect recorded with its id is applied exactly once.
//   - Ack, Retry and Fail of a lost claim return ErrLost and change
//     nothing. One whose request failed (an error that is neither nil nor
//     ErrLost) may have been applied, and may be called again. On etcd
//     and ZooKeeper the later call finds out from the server: nil when the
//     earlier one took effect and did what it does, ErrNotHeld when it
//     did another end, ErrLost only when the claim was lost (or an error
//     when the server cannot tell: see the backend's documentation).
//     Elsewhere, ErrLost after such an error means that the claim ended:
//     lost, or by the earlier call.
//   - Ready jobs are claimed oldest first: in the order they became ready
//     (put, their delay ended, or given back). A backend states any
//     exception in its documentation.
//   - Claimants waiting on an empty queue are woken by the backend's
//     notification, not by polling; a delayed job wakes one at its time.
//   - Put is atomic: a producer that dies in the middle of a Put or
//     PutBatch leaves every job of it or none.
//
// Every call validates its arguments before any side effect: a nil
// payload, one larger than MaxPayload, a negative delay, a MaxAttempts
// below 1, an empty or too long key, a batch larger than MaxBatch give an
// error matching ErrInvalidArgument and change nothing.
//
// A handle is safe for concurrent use. Payloads passed in and returned
// are the caller's own (copied).
type Queue interface {
	// Name returns the name the handle was opened with.
	Name() string
	// MaxPayload returns the largest payload, in bytes, the backend
	// stores.
	MaxPayload() int
	// Put adds a job and returns its id. With UniqueKey, a Put whose key
	// is pending (ready, delayed or claimed) adds nothing and returns the
	// id of the pending job.
	Put(ctx context.Context, payload []byte, opts ...PutOption) (JobID, error)
	// PutBatch adds the jobs atomically (all or none) and returns their
	// ids, in order.
	PutBatch(ctx context.Context, jobs []JobSpec) ([]JobID, error)
	// Claim blocks until a job is ready, claims it, and returns it. When
	// ctx ends first it returns the context's error and claims nothing.
	Claim(ctx context.Context) (*Job, error)
	// TryClaim claims a ready job or returns ErrEmpty at once.
	TryClaim(ctx context.Context) (*Job, error)
	// ClaimBatch blocks until a job is ready and claims up to n ready
	// jobs (1 <= n <= MaxBatch), oldest first.
	ClaimBatch(ctx context.Context, n int) ([]*Job, error)
	// Stats counts the jobs by state.
	Stats(ctx context.Context) (QueueStats, error)
	// Dead returns up to limit dead letters (limit > 0), oldest first.
	Dead(ctx context.Context, limit int) ([]DeadLetter, error)
	// Requeue makes the dead letters with the given ids ready again, their
	// attempts counted from zero, and returns how many it requeued. Ids
	// of jobs that are not dead letters are ignored, and so is a dead
	// letter whose key another pending job has taken since.
	Requeue(ctx context.Context, ids ...JobID) (int, error)
	// Purge deletes the dead letters with the given ids and returns how
	// many it deleted; other ids are ignored.
	Purge(ctx context.Context, ids ...JobID) (int, error)
	// Close releases the handle: a Claim in progress returns ErrClosed,
	// and jobs the handle still holds go back to the queue (their claims
	// are lost). The queue and its jobs stay.
	Close() error
}

// QueueStats counts the jobs of a queue by state.
type QueueStats struct {
	Ready    int `json:"ready"`     // may be claimed now
	Delayed  int `json:"delayed"`   // ready later (a delay, or a Retry)
	InFlight int `json:"in_flight"` // claimed and not yet given back
	Dead     int `json:"dead"`      // dead letters
}

// DeadLetter is a job that used up its attempts.
type DeadLetter struct {
	ID       JobID     `json:"id"`
	Payload  []byte    `json:"payload"`
	Attempts int       `json:"attempts"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"` // when it died
}

// JobSpec is one job of a PutBatch.
type JobSpec struct {
	Payload []byte
	Options []PutOption
}

// PutOption sets a property of a job being put. The zero PutOption is
// refused.
type PutOption struct{ set func(*putSpec) error }

type putSpec struct {
	delay    time.Duration
	at       time.Time
	hasDelay bool
	hasAt    bool
	key      string
	hasKey   bool
	attempts int
}

// Delay makes the job ready d from now (d >= 0).
func Delay(d time.Duration) PutOption {
	return PutOption{func(p *putSpec) error { p.delay, p.hasDelay = d, true; return nil }}
}

// ReadyAt makes the job ready at t (at once if t has passed). It cannot be
// combined with Delay.
func ReadyAt(t time.Time) PutOption {
	return PutOption{func(p *putSpec) error { p.at, p.hasAt = t, true; return nil }}
}

// UniqueKey gives the job a key (1 to MaxJobKeyLen bytes): while a job
// with the key is pending (ready, delayed or claimed), a Put with it adds
// nothing and returns that job's id.
func UniqueKey(key string) PutOption {
	return PutOption{func(p *putSpec) error { p.key, p.hasKey = key, true; return nil }}
}

// MaxAttempts sets how many times the job may be claimed (1 to
// MaxJobAttempts; default DefaultMaxAttempts) before it becomes a dead
// letter.
func MaxAttempts(n int) PutOption {
	return PutOption{func(p *putSpec) error { p.attempts = n; return nil }}
}
