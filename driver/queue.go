package driver

import (
	"context"
	"time"
)

// QueueOpener is implemented by backends that serve work queues
// (baton.Queue). It is optional: for a backend without it the core returns
// an error matching baton.ErrUnsupported from Backend.Queue.
type QueueOpener interface {
	// OpenQueue opens a driver for a name the core has validated.
	OpenQueue(ctx context.Context, name string) (Queue, error)
}

// PutJob is one job to put, validated by the core.
type PutJob struct {
	Payload     []byte    // not nil, at most Queue.MaxPayload bytes
	Key         string    // uniqueness key; "" for none
	At          time.Time // when it becomes ready; zero: now
	MaxAttempts int       // > 0
}

// Claim is one job claimed.
type Claim struct {
	ID          uint64
	Payload     []byte // the caller's own
	Attempt     int    // 1 for the first claim of the job
	MaxAttempts int
	Token       uint64 // greater than every token given before by the queue
	Loss        *Loss  // fires when the claim can no longer be trusted
	Data        any    // driver-private state of the claim
}

// QueueStats counts the jobs of a queue by state.
type QueueStats struct {
	Ready, Delayed, InFlight, Dead int
}

// DeadJob is one dead letter.
type DeadJob struct {
	ID       uint64
	Payload  []byte
	Attempts int
	Reason   string
	At       time.Time // when it died
}

// Queue is one handle's connection to a named work queue.
//
// What the core guarantees to a Queue driver:
//   - ctx is not nil and not done when a call starts, and the handle is
//     open; jobs are validated (see PutJob); 0 < n <= baton.MaxBatch for
//     Claim and len(jobs) <= baton.MaxBatch for Put; ids are not empty;
//   - Ack and Retry receive a claim this driver returned, at most one
//     of them once per claim, and not after its Loss fired;
//   - Close is called once, after every call in progress has returned;
//     a blocked Claim is ended first by cancelling its context.
//
// What a driver guarantees to the core:
//   - Put is atomic: every job of the call is added, or none; a job whose
//     key is pending (ready, delayed or claimed) adds nothing and returns
//     the id of the pending job, as does a second job of one call with a
//     key already seen in it; it returns an error matching baton.ErrFull,
//     having added nothing, when the jobs do not fit;
//   - Claim takes up to n ready jobs, oldest first, each claimed by no one
//     else, with a token greater than every token the queue gave before;
//     with wait it blocks until at least one is ready, woken by the
//     backend rather than by polling, and returns promptly with ctx's
//     error once ctx is done, having claimed nothing; without wait it
//     returns an error matching baton.ErrEmpty when none is ready;
//   - a claim whose claimant is gone (its process died, its lease lapsed)
//     goes back to the queue, its Loss firing before the job can be given
//     to anyone else, and counts as an attempt;
//   - Ack and Retry of a claim that is no longer the claimant's return an
//     error matching baton.ErrLost and change nothing; Retry makes the job
//     ready at at (zero: now), or dead with reason when the claim was its
//     last attempt;
//   - Requeue makes the listed dead letters ready with their attempts
//     counted from zero; Purge deletes them; both ignore other ids and
//     return how many they changed;
//   - Close gives back the claims still held (their Loss fires);
//   - errors are bare causes, as for the other drivers.
type Queue interface {
	// MaxPayload is the largest payload, in bytes, the backend stores.
	MaxPayload() int
	Put(ctx context.Context, jobs []PutJob) ([]uint64, error)
	Claim(ctx context.Context, n int, wait bool) ([]Claim, error)
	Ack(ctx context.Context, c Claim) error
	Retry(ctx context.Context, c Claim, at time.Time, reason string) error
	Stats(ctx context.Context) (QueueStats, error)
	// Dead returns up to limit dead letters, oldest first.
	Dead(ctx context.Context, limit int) ([]DeadJob, error)
	Requeue(ctx context.Context, ids []uint64) (int, error)
	Purge(ctx context.Context, ids []uint64) (int, error)
	Close() error
}
