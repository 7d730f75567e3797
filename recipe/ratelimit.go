package recipe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Limit is a rate limit: Rate events per Period on average, of which up
// to Burst may come at once after a quiet time. Over any span of time d,
// a limit admits at most Burst + Rate·d/Period events.
type Limit struct {
	Rate   int64
	Period time.Duration
	Burst  int64
}

// MinInterval is the shortest time between events that a Limit may ask
// for (Period/Rate): stores that count time in microseconds (Redis's
// TIME) keep every limit exact.
const MinInterval = time.Microsecond

// Interval is the time one event takes of the limit, Period/Rate rounded
// up to a whole microsecond (so that no store admits more than asked).
func (l Limit) Interval() time.Duration {
	d := 1000 * l.Rate // no overflow: Validate keeps Rate at most Period in µs
	us := int64(l.Period) / d
	if int64(l.Period)%d != 0 {
		us++
	}
	return time.Duration(us) * time.Microsecond
}

// Validate reports a limit that no store keeps, with ErrInvalidArgument.
func (l Limit) Validate() error {
	switch {
	case l.Rate <= 0 || l.Burst <= 0 || l.Period <= 0:
		return fmt.Errorf("%w: rate limit %d per %v, burst %d: all must be positive", baton.ErrInvalidArgument, l.Rate, l.Period, l.Burst)
	case l.Period/time.Duration(l.Rate) < MinInterval:
		return fmt.Errorf("%w: rate limit %d per %v: more than one event per %v", baton.ErrInvalidArgument, l.Rate, l.Period, MinInterval)
	case l.Burst > math.MaxInt64/4/int64(l.Interval()):
		return fmt.Errorf("%w: rate limit burst %d of %v each: too long", baton.ErrInvalidArgument, l.Burst, l.Interval())
	}
	return nil
}

// RateOp is the step a RateStore runs.
type RateOp uint8

const (
	// RateAllow takes N events if the limit admits them now; otherwise it
	// changes nothing and says how long until it would. N 0 only checks
	// the parameters, storing them when the limit is new.
	RateAllow RateOp = iota
	// RateReserve takes N events at once and says how long the caller
	// must wait before acting on them.
	RateReserve
	// RateCancel gives back N events reserved for the time At, if At is
	// still to come.
	RateCancel
	// RateSet replaces the limit's parameters (the stored ones whatever
	// they are) and keeps the events taken.
	RateSet
)

// RateOutcome is what one step of a RateStore found and did.
type RateOutcome struct {
	// Allowed: RateAllow took the events.
	Allowed bool
	// Wait is, for a refused RateAllow, the time until the events would
	// be admitted, and for RateReserve the time until they may be used.
	Wait time.Duration
	// Remaining is how many events the limit would admit now, after the
	// step.
	Remaining int64
	// Now is the store's clock at the step.
	Now time.Time
}

// RateStore keeps the state of one rate limit and runs each step on it
// atomically: the parameters are stored with the state, and a step with
// other parameters than the stored ones (RateSet excepted) is refused with
// an error matching ErrMismatch (a *baton.MismatchError naming the first
// that differs, made by RateMismatch). NewRateLimiter keeps it in a
// baton.Value, or in the backend's own store (see NewRateLimiter);
// cluster/redislock's and local's are also served as RateStores.
type RateStore interface {
	Step(ctx context.Context, op RateOp, lim Limit, n int64, at time.Time) (RateOutcome, error)
	Close() error
}

// RateMismatch is the error of a step whose limit differs from the one
// stored, have.
func RateMismatch(have, want Limit) error {
	switch {
	case have.Rate != want.Rate:
		return &baton.MismatchError{Param: "rate", Have: have.Rate, Want: want.Rate}
	case have.Period != want.Period:
		return &baton.MismatchError{Param: "period (ns)", Have: int64(have.Period), Want: int64(want.Period)}
	default:
		return &baton.MismatchError{Param: "burst", Have: have.Burst, Want: want.Burst}
	}
}

// RateLimiter is a rate limit shared by every process that opens its name:
// the generic cell rate algorithm, whose state is one time (the
// theoretical arrival time of the next event) stored with the limit's
// parameters. A process that opens the name with other parameters is
// refused (ErrMismatch); SetLimit changes them for every process at once.
//
// Allow and Reserve are one atomic step of the store; Wait sleeps until
// the time the store computed (one timer, no polling) and tries again,
// taking nothing while it waits, so a cancelled Wait consumed nothing.
type RateLimiter struct {
	name  string
	store RateStore

	mu  sync.Mutex
	lim Limit // guarded by mu
}

// NewRateLimiter opens the limit of name on b with lim, which must match
// the stored limit if there is one. The limit is kept in the backend's own
// store when it has one (driver.RateOpener: local's word in shared memory,
// redislock's script), otherwise in the Value of name.
func NewRateLimiter(ctx context.Context, b baton.Backend, name string, lim Limit) (*RateLimiter, error) {
	if err := lim.Validate(); err != nil {
		return nil, fmt.Errorf("recipe: rate limit %q: %w", name, err)
	}
	if ro, ok := b.(driver.RateOpener); ok {
		d, err := ro.OpenRate(ctx, name)
		if err == nil {
			return NewRateLimiterOn(ctx, name, driverRateStore{d}, lim)
		}
		if !errors.Is(err, baton.ErrUnsupported) {
			return nil, err
		}
	}
	v, err := b.Value(ctx, name)
	if err != nil {
		return nil, err
	}
	return NewRateLimiterOn(ctx, name, &valueRateStore{v: v}, lim)
}

// NewRateLimiterOn opens a limit kept in store (named name in errors), with
// lim, which must match the stored limit if there is one. The limiter owns
// the store: Close closes it, and so does a failure of NewRateLimiterOn.
func NewRateLimiterOn(ctx context.Context, name string, store RateStore, lim Limit) (*RateLimiter, error) {
	if err := lim.Validate(); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("recipe: rate limit %q: %w", name, err)
	}
	r := &RateLimiter{name: name, store: store, lim: lim}
	if _, err := store.Step(ctx, RateAllow, lim, 0, time.Time{}); err != nil {
		_ = store.Close()
		return nil, r.wrap("open", err)
	}
	return r, nil
}

func (r *RateLimiter) wrap(op string, err error) error {
	return fmt.Errorf("recipe: rate limit %q: %s: %w", r.name, op, err)
}

// Limit returns the limit the handle works with.
func (r *RateLimiter) Limit() Limit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lim
}

// Close closes the handle; the limit stays.
func (r *RateLimiter) Close() error { return r.store.Close() }

func (r *RateLimiter) checkN(n int64, lim Limit) error {
	if n <= 0 || n > lim.Burst {
		return r.wrap("take", fmt.Errorf("%w: %d events: want 1 to the burst, %d", baton.ErrInvalidArgument, n, lim.Burst))
	}
	return nil
}

// Allow takes n events if the limit admits them now. Refused, it takes
// nothing and says in RetryAfter how long until it would (others may take
// them first).
func (r *RateLimiter) Allow(ctx context.Context, n int64) (RateResult, error) {
	lim := r.Limit()
	if err := r.checkN(n, lim); err != nil {
		return RateResult{}, err
	}
	o, err := r.store.Step(ctx, RateAllow, lim, n, time.Time{})
	if err != nil {
		return RateResult{}, r.wrap("allow", err)
	}
	res := RateResult{Allowed: o.Allowed, Remaining: o.Remaining}
	if !o.Allowed {
		res.RetryAfter = o.Wait
	}
	return res, nil
}

// RateResult is the outcome of Allow.
type RateResult struct {
	Allowed    bool
	Remaining  int64         // events the limit admits now, after these
	RetryAfter time.Duration // refused: the time until n would be admitted
}

// Wait takes n events, waiting until the limit admits them, or returns
// ctx's error having taken nothing.
func (r *RateLimiter) Wait(ctx context.Context, n int64) error {
	for {
		res, err := r.Allow(ctx, n)
		if err != nil || res.Allowed {
			return err
		}
		t := time.NewTimer(res.RetryAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Reservation is n events taken by Reserve for a time that may be to come.
type Reservation struct {
	r     *RateLimiter
	lim   Limit
	n     int64
	at    time.Time // the store's clock: when the events may be used
	delay time.Duration
}

// Reserve takes n events at once, whatever the limit admits now, and says
// when they may be used: the caller waits Delay before acting, or gives
// them back with Cancel. Reservations queue: each one's time comes after
// the ones before it.
func (r *RateLimiter) Reserve(ctx context.Context, n int64) (*Reservation, error) {
	lim := r.Limit()
	if err := r.checkN(n, lim); err != nil {
		return nil, err
	}
	o, err := r.store.Step(ctx, RateReserve, lim, n, time.Time{})
	if err != nil {
		return nil, r.wrap("reserve", err)
	}
	return &Reservation{r: r, lim: lim, n: n, at: o.Now.Add(o.Wait), delay: o.Wait}, nil
}

// Delay is the time, from Reserve, until the events may be used.
func (res *Reservation) Delay() time.Duration { return res.delay }

// Cancel gives the events back if their time is still to come (so that
// later callers get them sooner); afterwards they are spent.
func (res *Reservation) Cancel(ctx context.Context) error {
	_, err := res.r.store.Step(ctx, RateCancel, res.lim, res.n, res.at)
	if err != nil {
		return res.r.wrap("cancel", err)
	}
	return nil
}

// SetLimit changes the limit's parameters for every process in one step:
// a process that works with the old ones is refused with ErrMismatch at
// its next call (and reopens, or calls SetLimit itself). The events taken
// stay taken.
func (r *RateLimiter) SetLimit(ctx context.Context, lim Limit) error {
	if err := lim.Validate(); err != nil {
		return r.wrap("set", err)
	}
	if _, err := r.store.Step(ctx, RateSet, lim, 0, time.Time{}); err != nil {
		return r.wrap("set", err)
	}
	r.mu.Lock()
	r.lim = lim
	r.mu.Unlock()
	return nil
}
