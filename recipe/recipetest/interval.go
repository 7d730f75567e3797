package recipetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

func (e *env) intervalLock(t testing.TB, b baton.Backend, name string) *recipe.IntervalLock {
	t.Helper()
	l, err := recipe.NewIntervalLock(bg(), b, name)
	return closeAtEnd(t, "NewIntervalLock", l, err)
}

func nop(context.Context) error { return nil }

// Bad input is refused before anything is taken: the lock stays free and
// no start is recorded.
func testIntervalBadInput(t *testing.T, e *env) {
	b, name := e.open(t), e.name(t)
	l := e.intervalLock(t, b, name)
	for _, c := range []struct {
		iv recipe.Interval
		fn func(context.Context) error
	}{
		{recipe.Interval{AtLeast: 0}, nop},
		{recipe.Interval{AtLeast: -time.Second}, nop},
		{recipe.Interval{AtLeast: time.Second, AtMost: -1}, nop},
		{recipe.Interval{AtLeast: time.Second}, nil},
	} {
		if _, err := l.Run(bg(), c.iv, c.fn); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Run(%+v, fn nil %v): %v, want ErrInvalidArgument", c.iv, c.fn == nil, err)
		}
	}
	free(t, b, name)
	res, err := l.Run(bg(), recipe.Interval{AtLeast: time.Hour}, nop)
	if err != nil || !res.Ran || !res.Last.IsZero() {
		t.Errorf("first Run after the refusals: %+v, %v; want a run with no start before", res, err)
	}
}

// Eight goroutines on two backends try to run one job every 20 ms for
// 2.5 s (up to 10 s on a slow server, until it ran three times), with an
// interval of 700 ms: runs never overlap and start at
// least the interval apart, and the job does run. The start a run records
// is taken inside its Run call, before the function is called: so a run's
// function starts at least the interval after the call to Run of the run
// before it, however slow the server is.
func testIntervalOnce(t *testing.T, e *env) {
	const every = 700 * time.Millisecond
	name := e.name(t)
	bs := []baton.Backend{e.open(t), e.open(t)}
	var mu sync.Mutex
	type start struct{ called, ran time.Time }
	var starts []start
	var running atomic.Int32
	// 2.5 s, longer (up to 10 s) while a slow server has given fewer
	// than three runs.
	end, last := time.Now().Add(2500*time.Millisecond), time.Now().Add(10*time.Second)
	var runs atomic.Int32
	going := func() bool {
		now := time.Now()
		return now.Before(end) || runs.Load() < 3 && now.Before(last)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		l := e.intervalLock(t, bs[i%2], name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for going() {
				called := time.Now()
				_, err := l.Run(ctx20(t), recipe.Interval{AtLeast: every, AtMost: 10 * time.Second}, func(context.Context) error {
					if running.Add(1) != 1 {
						t.Error("two runs at once")
					}
					mu.Lock()
					starts = append(starts, start{called, time.Now()})
					runs.Add(1)
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					running.Add(-1)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if len(starts) < 3 {
		t.Errorf("%d runs in 10 s with an interval of %v", len(starts), every)
	}
	for i := 1; i < len(starts); i++ {
		if d := starts[i].ran.Sub(starts[i-1].called); d < every {
			t.Errorf("run %d started %v after the call of run %d", i, d, i-1)
		}
	}
}

// A quick run keeps the others off for the whole interval, and says when
// the next may start.
func testIntervalAtLeast(t *testing.T, e *env) {
	name := e.name(t)
	a, b := e.intervalLock(t, e.open(t), name), e.intervalLock(t, e.open(t), name)
	iv := recipe.Interval{AtLeast: time.Hour}
	first, err := a.Run(bg(), iv, nop)
	ok(t, "Run", err)
	second, err := b.Run(bg(), iv, func(context.Context) error { t.Error("ran twice in an hour"); return nil })
	ok(t, "Run", err)
	if !first.Ran || second.Ran || second.Last.IsZero() || !second.Next.Equal(second.Last.Add(time.Hour)) {
		t.Errorf("runs %+v then %+v", first, second)
	}
}

// A run that hangs past AtMost is given up: its context ends first (cause
// ErrGaveUp), then the lock is given back and another process runs.
func testIntervalAtMost(t *testing.T, e *env) {
	name := e.name(t)
	a, b := e.intervalLock(t, e.open(t), name), e.intervalLock(t, e.open(t), name)
	iv := recipe.Interval{AtLeast: 100 * time.Millisecond, AtMost: 500 * time.Millisecond}
	release := make(chan struct{})
	defer close(release)
	var told atomic.Bool
	start := time.Now()
	_, err := a.Run(bg(), iv, func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			if errors.Is(context.Cause(ctx), recipe.ErrGaveUp) {
				told.Store(true)
			}
		}()
		<-release // hangs, whatever its context says
		return nil
	})
	if !errors.Is(err, recipe.ErrGaveUp) || !errors.Is(err, baton.ErrLost) {
		t.Errorf("a hung run: %v, want ErrGaveUp", err)
	}
	if d := time.Since(start); d < 450*time.Millisecond || d > 5*time.Second {
		t.Errorf("a hung run given up after %v, want 500 ms", d)
	}
	time.Sleep(50 * time.Millisecond)
	if !told.Load() {
		t.Errorf("the hung run's context did not end with ErrGaveUp")
	}
	res, err := b.Run(bg(), iv, nop)
	if err != nil || !res.Ran {
		t.Errorf("Run after a run was given up: %+v, %v", res, err)
	}
}

// roleIntervalHang runs the job named arg with a function that says
// "running" and never returns, until killed.
func roleIntervalHang(e *env, arg string) error {
	b, err := e.s.Open(e.cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	l, err := recipe.NewIntervalLock(bg(), b, arg)
	if err != nil {
		return err
	}
	_, err = l.Run(bg(), recipe.Interval{AtLeast: time.Second}, func(context.Context) error {
		fmt.Println("running")
		select {}
	})
	return err
}

// A holder killed in its run: the job runs again, elsewhere, once the
// holder's Mutex is free and the interval has passed since its start.
func testIntervalKill(t *testing.T, e *env) {
	name := e.name(t)
	p := e.spawn(t, "intervalhang", name)
	p.expect(t, "running", 30*time.Second)
	killed := time.Now()
	p.kill()
	l := e.intervalLock(t, e.open(t), name)
	deadline := killed.Add(e.s.Failover + 5*time.Second)
	for {
		res, err := l.Run(bg(), recipe.Interval{AtLeast: time.Second}, nop)
		ok(t, "Run", err)
		if res.Ran {
			if res.Last.IsZero() || res.Last.After(killed) {
				t.Errorf("the killed run's start is not recorded: %+v", res)
			}
			t.Logf("ran again %v after the kill", time.Since(killed))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run %v after the holder was killed (last %+v)", time.Since(killed), res)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
