package baton

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/batonlock/baton/driver"
)

// jobQueue is the core of a Queue handle: validation before the driver,
// ErrClosed, error wrapping, and a Close that ends blocked Claims and waits
// for calls in progress before it closes the driver. (The type named queue
// is the core's FIFO of waiting goroutines, core_queue.go.)
type jobQueue struct {
	b    *coreBackend
	name string
	d    driver.Queue

	// mu is held for reading by every call while it uses d and for
	// writing by Close, so that d.Close comes after every call.
	mu     sync.RWMutex
	closed atomic.Bool
	// stop is cancelled by Close: it ends the Claims in progress.
	stop   context.Context
	cancel context.CancelFunc
}

func (b *coreBackend) Queue(ctx context.Context, name string) (Queue, error) {
	q, err := b.openQueue(ctx, name)
	if err != nil {
		return nil, b.fail("open", KindQueue, name, err)
	}
	return q, nil
}

func (b *coreBackend) openQueue(ctx context.Context, name string) (*jobQueue, error) {
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	qo, ok := b.d.(driver.QueueOpener)
	if !ok {
		return nil, fmt.Errorf("%w: the %s backend has no work queues", ErrUnsupported, b.kind)
	}
	d, err := qo.OpenQueue(ctx, name)
	if err != nil {
		return nil, err
	}
	q := &jobQueue{b: b, name: name, d: d}
	q.stop, q.cancel = context.WithCancel(context.Background())
	if err := b.register(q); err != nil {
		return nil, err
	}
	return q, nil
}

// fail wraps the cause of a failed op in the handle's *Error, and reports
// it to the Observer.
func (q *jobQueue) fail(op string, err error) error {
	return q.b.failed(op, KindQueue, q.name, err)
}

func (q *jobQueue) Name() string    { return q.name }
func (q *jobQueue) MaxPayload() int { return q.d.MaxPayload() }

// enter starts a call: it returns with mu held for reading, or an error.
// A context already done fails every call alike, before the driver.
func (q *jobQueue) enter(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.RLock()
	if q.closed.Load() {
		q.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// spec validates one job and returns it for the driver.
func (q *jobQueue) spec(payload []byte, opts []PutOption) (driver.PutJob, error) {
	return PutSpec(payload, q.d.MaxPayload(), opts...)
}

func (q *jobQueue) Put(ctx context.Context, payload []byte, opts ...PutOption) (JobID, error) {
	j, err := q.spec(payload, opts)
	if err != nil {
		return 0, q.fail("put", err)
	}
	ids, err := q.put(ctx, []driver.PutJob{j})
	if err != nil {
		return 0, q.fail("put", err)
	}
	return JobID(ids[0]), nil
}

func (q *jobQueue) PutBatch(ctx context.Context, jobs []JobSpec) ([]JobID, error) {
	if len(jobs) > MaxBatch {
		return nil, q.fail("put", fmt.Errorf("%w: a batch of %d jobs, more than %d", ErrInvalidArgument, len(jobs), MaxBatch))
	}
	js := make([]driver.PutJob, len(jobs))
	for i, s := range jobs {
		j, err := q.spec(s.Payload, s.Options)
		if err != nil {
			return nil, q.fail("put", fmt.Errorf("job %d: %w", i, err))
		}
		js[i] = j
	}
	if len(js) == 0 {
		if err := q.enter(ctx); err != nil {
			return nil, q.fail("put", err)
		}
		q.mu.RUnlock()
		return []JobID{}, nil
	}
	raw, err := q.put(ctx, js)
	if err != nil {
		return nil, q.fail("put", err)
	}
	ids := make([]JobID, len(raw))
	for i, id := range raw {
		ids[i] = JobID(id)
	}
	return ids, nil
}

func (q *jobQueue) put(ctx context.Context, js []driver.PutJob) ([]uint64, error) {
	if err := q.enter(ctx); err != nil {
		return nil, err
	}
	defer q.mu.RUnlock()
	return q.d.Put(ctx, js)
}

func (q *jobQueue) Claim(ctx context.Context) (*Job, error) {
	cs, at, err := q.claim(ctx, "claim", 1, true)
	if err != nil {
		return nil, err
	}
	return &Job{q: q, c: cs[0], at: at}, nil
}

func (q *jobQueue) TryClaim(ctx context.Context) (*Job, error) {
	cs, at, err := q.claim(ctx, "tryclaim", 1, false)
	if err != nil {
		return nil, err
	}
	return &Job{q: q, c: cs[0], at: at}, nil
}

func (q *jobQueue) ClaimBatch(ctx context.Context, n int) ([]*Job, error) {
	if n < 1 || n > MaxBatch {
		return nil, q.fail("claim", fmt.Errorf("%w: a batch of %d jobs, must be 1..%d", ErrInvalidArgument, n, MaxBatch))
	}
	cs, at, err := q.claim(ctx, "claim", n, true)
	if err != nil {
		return nil, err
	}
	js := make([]*Job, len(cs))
	for i, c := range cs {
		js[i] = &Job{q: q, c: c, at: at}
	}
	return js, nil
}

// claim claims up to n jobs; at is when, for an Observer, which sees it as
// an acquisition: EventAcquire, then EventAcquired per job (its token, the
// wait) or EventFailed.
func (q *jobQueue) claim(ctx context.Context, op string, n int, wait bool) (cs []driver.Claim, at int64, err error) {
	o := q.b.observer()
	if o == nil {
		cs, err = q.claimDriver(ctx, op, n, wait)
		return cs, 0, err
	}
	q.b.emit(o, Event{Type: EventAcquire, Kind: KindQueue, Name: q.name, Op: op})
	t0 := monoNow()
	cs, err = q.claimDriver(ctx, op, n, wait)
	now := monoNow()
	if err != nil {
		q.b.emit(o, Event{Type: EventFailed, Kind: KindQueue, Name: q.name, Op: op, Wait: time.Duration(now - t0), Err: err})
		return nil, 0, err
	}
	for _, c := range cs {
		q.b.emit(o, Event{Type: EventAcquired, Kind: KindQueue, Name: q.name, Op: op, Wait: time.Duration(now - t0), Token: Token(c.Token)})
	}
	return cs, now, nil
}

func (q *jobQueue) claimDriver(ctx context.Context, op string, n int, wait bool) ([]driver.Claim, error) {
	if err := q.enter(ctx); err != nil {
		return nil, q.fail(op, err)
	}
	defer q.mu.RUnlock()
	cs, err := q.claimOnce(ctx, n, wait)
	if err != nil {
		return nil, q.fail(op, err)
	}
	return cs, nil
}

// claimOnce asks the driver. A claim that may wait must end with ctx or
// with Close, whichever comes first; one that may not returns promptly,
// and Close waits for it. The context for both ends is made only when ctx
// can end: it costs a third of a same-host claim.
func (q *jobQueue) claimOnce(ctx context.Context, n int, wait bool) ([]driver.Claim, error) {
	switch {
	case !wait:
		return q.d.Claim(ctx, n, false)
	case ctx.Done() == nil:
		// Background is the stop context's parent: no wrapper (whose
		// conversion to an interface would allocate) for it.
		dctx := q.stop
		if ctx != context.Background() {
			dctx = stopContext{ctx, q.stop}
		}
		cs, err := q.d.Claim(dctx, n, true)
		if err != nil && q.stop.Err() != nil {
			err = ErrClosed
		}
		return cs, err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(q.stop, func() { cancel(ErrClosed) })
	defer stop()
	cs, err := q.d.Claim(wctx, n, true)
	if err != nil && context.Cause(wctx) == ErrClosed {
		err = ErrClosed
	}
	return cs, err
}

func (q *jobQueue) Stats(ctx context.Context) (QueueStats, error) {
	if err := q.enter(ctx); err != nil {
		return QueueStats{}, q.fail("stats", err)
	}
	defer q.mu.RUnlock()
	s, err := q.d.Stats(ctx)
	if err != nil {
		return QueueStats{}, q.fail("stats", err)
	}
	return QueueStats{Ready: s.Ready, Delayed: s.Delayed, InFlight: s.InFlight, Dead: s.Dead}, nil
}

func (q *jobQueue) Dead(ctx context.Context, limit int) ([]DeadLetter, error) {
	if limit < 1 {
		return nil, q.fail("dead", fmt.Errorf("%w: limit %d, must be > 0", ErrInvalidArgument, limit))
	}
	if err := q.enter(ctx); err != nil {
		return nil, q.fail("dead", err)
	}
	defer q.mu.RUnlock()
	ds, err := q.d.Dead(ctx, limit)
	if err != nil {
		return nil, q.fail("dead", err)
	}
	out := make([]DeadLetter, len(ds))
	for i, d := range ds {
		out[i] = DeadLetter{ID: JobID(d.ID), Payload: d.Payload, Attempts: d.Attempts, Reason: d.Reason, At: d.At}
	}
	return out, nil
}

func (q *jobQueue) Requeue(ctx context.Context, ids ...JobID) (int, error) {
	return q.byIDs(ctx, "requeue", ids, q.d.Requeue)
}

func (q *jobQueue) Purge(ctx context.Context, ids ...JobID) (int, error) {
	return q.byIDs(ctx, "purge", ids, q.d.Purge)
}

func (q *jobQueue) byIDs(ctx context.Context, op string, ids []JobID, do func(context.Context, []uint64) (int, error)) (int, error) {
	if len(ids) == 0 {
		return 0, q.fail(op, fmt.Errorf("%w: no job ids", ErrInvalidArgument))
	}
	raw := make([]uint64, len(ids))
	for i, id := range ids {
		raw[i] = uint64(id)
	}
	if err := q.enter(ctx); err != nil {
		return 0, q.fail(op, err)
	}
	defer q.mu.RUnlock()
	n, err := do(ctx, raw)
	return n, q.fail(op, err)
}

func (q *jobQueue) Close() error { return q.fail("close", q.close()) }

func (q *jobQueue) close() error {
	if !q.closed.CompareAndSwap(false, true) {
		return nil
	}
	q.cancel()
	q.mu.Lock()
	err := q.d.Close()
	q.mu.Unlock()
	q.b.forget(q)
	return err
}

// maxReadyAt is the latest time a job may become ready: backends keep
// times as nanoseconds since 1970 in 63 bits, and a delay that ends later
// would come round to the past.
var maxReadyAt = time.Unix(1<<33, 0)

// cutReason shortens a reason to MaxReasonLen bytes at a character
// boundary.
func cutReason(s string) string {
	if len(s) <= MaxReasonLen {
		return s
	}
	s = s[:MaxReasonLen]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

var _ Queue = (*jobQueue)(nil)

// stopContext is a context that cannot end by itself (its values are kept
// for the driver) ended by the handle's Close.
type stopContext struct {
	context.Context
	stop context.Context
}

func (c stopContext) Done() <-chan struct{} { return c.stop.Done() }
func (c stopContext) Err() error            { return c.stop.Err() }
