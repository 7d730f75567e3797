package driver

import (
	"context"
	"time"
)

// RateOpener is implemented by backends that keep a rate limit of package
// recipe in a store of their own, faster than a Value read and swapped (a
// word in shared memory, one server script). It is optional: recipe keeps
// the limit of a backend without it in a Value. The core's Backend
// implements it too, over its driver's: it validates the name, refuses a
// closed Backend, and closes the handle with the Backend; it returns an
// error matching baton.ErrUnsupported when the driver has no RateOpener.
type RateOpener interface {
	// OpenRate opens the store of the rate limit name.
	OpenRate(ctx context.Context, name string) (Rate, error)
}

// RateLimit is a rate limit's parameters, as recipe.Limit.Validate
// accepts them: Rate events per Period, Burst at once. Interval, the time
// one event takes, is Period/Rate rounded up to a whole microsecond.
type RateLimit struct {
	Rate     int64
	Period   time.Duration
	Burst    int64
	Interval time.Duration
}

// RateOp is the step a Rate runs; the values are recipe.RateOp's.
type RateOp uint8

// RateOutcome is what one step found and did (recipe.RateOutcome).
type RateOutcome struct {
	Allowed   bool
	Wait      time.Duration
	Remaining int64
	Now       time.Time
}

// Rate is one handle's connection to a rate limit: the contract of
// recipe.RateStore, in the driver's types. Each step is atomic; a step
// with other parameters than the stored ones (a change of parameters
// excepted) is refused with an error matching baton.ErrMismatch, having
// changed nothing. The core calls Close once, after every step in
// progress has returned.
type Rate interface {
	Step(ctx context.Context, op RateOp, lim RateLimit, n int64, at time.Time) (RateOutcome, error)
	Close() error
}
