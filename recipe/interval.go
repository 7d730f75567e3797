package recipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton"
)

// ErrGaveUp is the cause (context.Cause) of the context of a run that an
// IntervalLock gave up after its Interval.AtMost; the error of such a Run
// matches it and baton.ErrLost.
var ErrGaveUp = fmt.Errorf("recipe: run given up after its longest time: %w", baton.ErrLost)

// Interval is how often an IntervalLock's function runs.
type Interval struct {
	// AtLeast is the least time from the start of one run to the start of
	// the next, on any process: a run that was quick still keeps the
	// others off until then. It must be positive.
	AtLeast time.Duration
	// AtMost bounds a run: once it has run this long the lock is given
	// up, even if the function has not returned (its context is cancelled
	// first, with cause ErrGaveUp). 0: no bound but the hold's own loss.
	AtMost time.Duration
}

// IntervalLock runs a function on at most one process at a time, and at
// most once per Interval.AtLeast, over every process that opens its name
// on one Backend: jobs scheduled on many machines (cron) of which one
// should act.
//
// A run holds the name's Mutex, so no two run at once, and records its
// start time in the name's Value; a run starts only if the last recorded
// start is AtLeast ago. Start times are the starting process's wall
// clock, compared by the others with theirs: clocks that disagree by more
// than a small part of AtLeast shorten or lengthen the interval by that
// much. A holder that dies frees the Mutex (at once on the same host,
// when its lease ends elsewhere), and its start is recorded: the next run
// comes AtLeast after it.
type IntervalLock struct{ guarded }

// NewIntervalLock opens the Mutex and the Value of name on b.
func NewIntervalLock(ctx context.Context, b baton.Backend, name string) (*IntervalLock, error) {
	g, err := openGuarded(ctx, b, name)
	if err != nil {
		return nil, err
	}
	return &IntervalLock{g}, nil
}

// Close closes the lock's handles; a run in progress loses its hold.
func (l *IntervalLock) Close() error { return l.close() }

// RunResult says what Run did.
type RunResult struct {
	// Ran: the function was called (its error, if any, is Run's).
	Ran bool
	// Last is the start of the last run before this call (zero: none is
	// recorded); Next, when Ran is false, is when the next may start
	// (zero: a run is in progress elsewhere).
	Last, Next time.Time
}

// Run calls fn if no run of the name is in progress and none started less
// than iv.AtLeast ago, and returns once fn returned, or once the run was
// given up: at iv.AtMost, or when the hold was lost (a lease not renewed
// in time), fn's context is cancelled first and then the lock is given
// back, and Run returns an error matching baton.ErrLost without waiting
// for fn (which should stop, having been told). Otherwise it returns at
// once, Ran false. Bad input is refused before anything is taken.
func (l *IntervalLock) Run(ctx context.Context, iv Interval, fn func(context.Context) error) (RunResult, error) {
	if ctx == nil || fn == nil || iv.AtLeast <= 0 || iv.AtMost < 0 {
		return RunResult{}, fmt.Errorf("recipe: interval lock %q: a nil context or function, or an interval %+v: %w", l.name, iv, baton.ErrInvalidArgument)
	}
	hold, err := l.m.TryLock(ctx)
	if errors.Is(err, baton.ErrLocked) {
		return RunResult{}, nil
	}
	if err != nil {
		return RunResult{}, err
	}
	unlock := func() error {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return l.m.Unlock(uctx)
	}
	var res RunResult
	start := time.Now()
	_, err = swapValue(ctx, l.v, func(data []byte) ([]byte, error) {
		res.Last = decodeStart(data)
		if !res.Last.IsZero() && start.Before(res.Last.Add(iv.AtLeast)) {
			res.Next = res.Last.Add(iv.AtLeast)
			return nil, nil
		}
		return encodeStart(start, hold.Token()), nil
	})
	if err != nil || !res.Next.IsZero() {
		return res, errors.Join(err, unlock())
	}
	res.Ran = true
	runCtx, stop := hold.Context(ctx)
	defer stop()
	if iv.AtMost > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithDeadlineCause(runCtx, start.Add(iv.AtMost), ErrGaveUp)
		defer cancel()
	}
	done := make(chan error, 1)
	go func() { done <- fn(runCtx) }()
	select {
	case err = <-done:
		return res, errors.Join(err, unlock())
	case <-runCtx.Done():
	}
	// Given up (or the caller's ctx ended): fn was told by its context;
	// the lock goes back without waiting for it.
	select {
	case err = <-done:
		return res, errors.Join(err, unlock())
	default:
	}
	cause := context.Cause(runCtx)
	if !errors.Is(cause, baton.ErrLost) {
		cause = ctx.Err()
	}
	return res, errors.Join(fmt.Errorf("recipe: interval lock %q: run abandoned: %w", l.name, cause), unlock())
}

// The Value holds the start of the last run (Unix ns) and its hold's token.
func encodeStart(t time.Time, tok baton.Token) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano()))
	return binary.BigEndian.AppendUint64(b, uint64(tok))
}

// decodeStart reads a start; anything else reads as none.
func decodeStart(b []byte) time.Time {
	if len(b) != 16 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)))
}
