package recipetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

// rateMode is where the rate limiter's tests keep a limit.
type rateMode string

const (
	rateBackend rateMode = "backend" // recipe.NewRateLimiter: the backend's own store, or its Value
	rateStore   rateMode = "store"   // the suite's RateStore, by recipe.NewRateLimiterOn
	rateValue   rateMode = "value"   // the Value, the backend's own store hidden
)

// rateLimiter opens the limit name on b, kept as mode says.
func (e *env) rateLimiter(b baton.Backend, name string, lim recipe.Limit, mode rateMode) (*recipe.RateLimiter, error) {
	switch mode {
	case rateStore:
		s, err := e.s.RateStore(e.cfg, name)
		if err != nil {
			return nil, err
		}
		return recipe.NewRateLimiterOn(bg(), name, s, lim)
	case rateValue:
		// Behind its interface alone, the Backend shows no store of its
		// own (driver.RateOpener).
		return recipe.NewRateLimiter(bg(), struct{ baton.Backend }{b}, name, lim)
	}
	return recipe.NewRateLimiter(bg(), b, name, lim)
}

// rateTests are the rate limiter's tests, run as mode keeps the limit; the
// store and value modes only on a suite with a store of its own (for the
// others NewRateLimiter keeps the limit in the Value already).
func rateTests(mode rateMode) []subtest {
	w := func(f func(*testing.T, *env, rateMode)) func(*testing.T, *env) {
		return func(t *testing.T, e *env) {
			if mode != rateBackend && e.s.RateStore == nil {
				t.Skip("the suite has no RateStore")
			}
			f(t, e, mode)
		}
	}
	return []subtest{
		{"BadInput", w(testRateBadInput)},
		{"Hammer", w(testRateHammer)},
		{"Change", w(testRateChange)},
		{"WaitCancel", w(testRateWaitCancel)},
		{"Reserve", w(testRateReserve)},
	}
}

// Bad limits and counts are refused with ErrInvalidArgument, and none of
// them writes: a limit opened with them afterwards has its whole burst.
func testRateBadInput(t *testing.T, e *env, mode rateMode) {
	b, name := e.open(t), e.name(t)
	for _, lim := range []recipe.Limit{
		{Rate: 0, Period: time.Second, Burst: 1},
		{Rate: 1, Period: 0, Burst: 1},
		{Rate: 1, Period: time.Second, Burst: 0},
		{Rate: -1, Period: time.Second, Burst: 1},
		{Rate: 2000, Period: time.Millisecond, Burst: 1},
		{Rate: 1, Period: time.Hour, Burst: 1 << 60},
	} {
		if _, err := e.rateLimiter(b, name, lim, mode); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("open with %+v: %v, want ErrInvalidArgument", lim, err)
		}
	}
	lim := recipe.Limit{Rate: 1, Period: time.Hour, Burst: 3}
	r, err := e.rateLimiter(b, name, lim, mode)
	r = closeAtEnd(t, "open", r, err)
	for _, n := range []int64{0, -1, 4} {
		if _, err := r.Allow(bg(), n); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Allow(%d): %v", n, err)
		}
		if err := r.Wait(bg(), n); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Wait(%d): %v", n, err)
		}
		if _, err := r.Reserve(bg(), n); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Reserve(%d): %v", n, err)
		}
	}
	if err := r.SetLimit(bg(), recipe.Limit{Rate: 1, Period: time.Hour}); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("SetLimit with burst 0: %v", err)
	}
	res, err := r.Allow(bg(), 3)
	if err != nil || !res.Allowed || res.Remaining != 0 {
		t.Errorf("Allow(3) after the refusals: %+v, %v; want the whole burst", res, err)
	}
	res, err = r.Allow(bg(), 1)
	if err != nil || res.Allowed || res.RetryAfter < 59*time.Minute || res.RetryAfter > time.Hour {
		t.Errorf("Allow(1) past the burst: %+v, %v; want refused for about an hour", res, err)
	}
}

const (
	hammerProcs   = 4
	hammerPerProc = 4
)

var hammerLimit = recipe.Limit{Rate: 100, Period: time.Second, Burst: 10}

// roleRateHammer takes events of the limit in arg ("name mode startUnixNs
// durationNs") from hammerPerProc goroutines, half by Allow and half by
// Wait, from the start time for the duration, and says "took N".
func roleRateHammer(e *env, arg string) error {
	f := strings.Fields(arg)
	start, _ := strconv.ParseInt(f[2], 10, 64)
	d, _ := strconv.ParseInt(f[3], 10, 64)
	b, err := e.s.Open(e.cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	r, err := e.rateLimiter(b, f[0], hammerLimit, rateMode(f[1]))
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Println("ready")
	n, err := hammer(r, time.Unix(0, start), time.Duration(d))
	if err != nil {
		return err
	}
	fmt.Println("took", n)
	return nil
}

// hammer takes events of r from start until start+d and returns how many
// it took.
func hammer(r *recipe.RateLimiter, start time.Time, d time.Duration) (int64, error) {
	time.Sleep(time.Until(start))
	end := start.Add(d)
	var took atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, hammerPerProc)
	for i := range hammerPerProc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithDeadline(bg(), end)
			defer cancel()
			for time.Now().Before(end) {
				if i%2 == 0 {
					err := r.Wait(ctx, 1)
					if errors.Is(err, context.DeadlineExceeded) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
					took.Add(1)
					continue
				}
				res, err := r.Allow(ctx, 1)
				if errors.Is(err, context.DeadlineExceeded) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				if res.Allowed {
					took.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return took.Load(), <-errs
}

// Sixteen goroutines in four processes take events of one limit for two
// seconds: they never get more than the burst and the rate over the time,
// and (the limit is not merely refusing) a tenth of it: sixteen takers of
// one version-checked value on a loaded server lose most of their tries to
// conflicts, which costs events, never adds any.
func testRateHammer(t *testing.T, e *env, mode rateMode) {
	const d = 2 * time.Second
	name := e.name(t)
	start := time.Now().Add(5 * time.Second)
	arg := fmt.Sprintf("%s %v %d %d", name, mode, start.UnixNano(), int64(d))
	procs := make([]*proc, hammerProcs)
	for i := range procs {
		procs[i] = e.spawn(t, "ratehammer", arg)
	}
	for _, p := range procs {
		p.expect(t, "ready", 30*time.Second)
	}
	if time.Now().After(start) {
		t.Skip("the helpers were not ready in time for a common start")
	}
	var total int64
	for _, p := range procs {
		n, err := strconv.ParseInt(p.expect(t, "took", 30*time.Second), 10, 64)
		ok(t, "took", err)
		total += n
	}
	// A step decided just before the end may commit just after it: one
	// interval more per goroutine is allowed for that.
	iv := hammerLimit.Interval()
	most := hammerLimit.Burst + int64(d/iv) + hammerProcs*hammerPerProc
	if total > most || total < most/10 {
		t.Errorf("%d events taken in %v, want at most %d and at least a tenth", total, d, most)
	}
	t.Logf("%d events in %v (at most %d)", total, d, most)
}

// Parameters: another limit on the name is refused with a MismatchError
// naming the stored one; SetLimit changes all three at once while others
// take events (each of them is then refused, never served on half the
// change), and the stored limit is whole.
func testRateChange(t *testing.T, e *env, mode rateMode) {
	b, name := e.open(t), e.name(t)
	old := recipe.Limit{Rate: 10, Period: time.Second, Burst: 5}
	neu := recipe.Limit{Rate: 20, Period: 2 * time.Second, Burst: 7}
	r, err := e.rateLimiter(b, name, old, mode)
	r = closeAtEnd(t, "open", r, err)
	_, err = e.rateLimiter(b, name, neu, mode)
	var me *baton.MismatchError
	if !errors.Is(err, baton.ErrMismatch) || !errors.As(err, &me) || me.Param != "rate" || me.Have != 10 || me.Want != 20 {
		t.Fatalf("open with another limit: %v, want a MismatchError of rate 10, not 20", err)
	}
	ctx := ctx20(t)
	var wg sync.WaitGroup
	var mismatched atomic.Int64
	for range 4 {
		o, err := e.rateLimiter(b, name, old, mode)
		o = closeAtEnd(t, "open", o, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := o.Allow(ctx, 1)
				if errors.Is(err, baton.ErrMismatch) {
					mismatched.Add(1)
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	s, err := e.rateLimiter(e.open(t), name, old, mode)
	s = closeAtEnd(t, "open", s, err)
	ok(t, "SetLimit", s.SetLimit(ctx, neu))
	wg.Wait()
	if mismatched.Load() != 4 {
		t.Errorf("%d of 4 takers refused after the change", mismatched.Load())
	}
	if s.Limit() != neu {
		t.Errorf("the changer's handle has %+v", s.Limit())
	}
	n, err := e.rateLimiter(b, name, neu, mode)
	n = closeAtEnd(t, "open with the new limit", n, err)
	if _, err := r.Allow(ctx, 1); !errors.Is(err, baton.ErrMismatch) {
		t.Errorf("Allow with the old limit after the change: %v", err)
	}
	// Right after the change, takers on the new limit get no more than it
	// admits: its burst and its rate over the time, the events taken under
	// the old limit still counted.
	const d = time.Second
	start := time.Now()
	var took atomic.Int64
	for range 4 {
		wg.Go(func() {
			for time.Since(start) < d {
				res, err := n.Allow(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					took.Add(1)
				}
			}
		})
	}
	wg.Wait()
	most := neu.Burst + int64(time.Since(start)/neu.Interval()) + 4
	if took.Load() > most {
		t.Errorf("%d events in %v after the change, the new limit admits %d", took.Load(), time.Since(start), most)
	}
}

// A Wait cancelled before its events are due takes nothing: the events it
// waited for are there once their time comes, for Allow.
func testRateWaitCancel(t *testing.T, e *env, mode rateMode) {
	b, name := e.open(t), e.name(t)
	lim := recipe.Limit{Rate: 2, Period: 2 * time.Second, Burst: 2} // 1 s each
	r, err := e.rateLimiter(b, name, lim, mode)
	r = closeAtEnd(t, "open", r, err)
	res, err := r.Allow(bg(), 2)
	if err != nil || !res.Allowed {
		t.Fatalf("Allow(2): %+v, %v", res, err)
	}
	for range 3 {
		ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
		err := r.Wait(ctx, 2)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait(2) cancelled: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(bg())
	cancel()
	if err := r.Wait(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: %v", err)
	}
	// Two intervals after the Allow, both events are back (had a Wait
	// taken one, only one would be).
	time.Sleep(2100 * time.Millisecond)
	res, err = r.Allow(bg(), 2)
	if err != nil || !res.Allowed {
		t.Errorf("Allow(2) once the cancelled Waits' time passed: %+v, %v", res, err)
	}
	start := time.Now()
	ok(t, "Wait(1)", r.Wait(ctx20(t), 1))
	if w := time.Since(start); w < 800*time.Millisecond || w > 5*time.Second {
		t.Errorf("Wait(1) on an empty limit of 1 s per event returned after %v", w)
	}
}

// Reservations queue one interval apart, and a cancelled one gives its
// time to the next.
func testRateReserve(t *testing.T, e *env, mode rateMode) {
	b, name := e.open(t), e.name(t)
	lim := recipe.Limit{Rate: 1, Period: 10 * time.Second, Burst: 1}
	r, err := e.rateLimiter(b, name, lim, mode)
	r = closeAtEnd(t, "open", r, err)
	first, err := r.Reserve(bg(), 1)
	ok(t, "Reserve", err)
	second, err := r.Reserve(bg(), 1)
	ok(t, "Reserve", err)
	if first.Delay() != 0 || second.Delay() < 9*time.Second || second.Delay() > 10*time.Second {
		t.Fatalf("delays %v, %v; want 0 and about 10 s", first.Delay(), second.Delay())
	}
	ok(t, "Cancel", second.Cancel(bg()))
	third, err := r.Reserve(bg(), 1)
	ok(t, "Reserve", err)
	if third.Delay() < 9*time.Second || third.Delay() > 10*time.Second {
		t.Errorf("a reservation after a cancelled one waits %v, want about 10 s", third.Delay())
	}
	if res, err := r.Allow(bg(), 1); err != nil || res.Allowed || res.RetryAfter < 19*time.Second {
		t.Errorf("Allow behind a reservation: %+v, %v", res, err)
	}
	// The first reservation's time has come: cancelling it gives nothing.
	ok(t, "Cancel", first.Cancel(bg()))
	if res, err := r.Allow(bg(), 1); err != nil || res.Allowed || res.RetryAfter < 19*time.Second {
		t.Errorf("Allow after cancelling a due reservation: %+v, %v", res, err)
	}
}
