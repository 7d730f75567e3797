package recipetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

func (e *env) latch(t testing.TB, b baton.Backend, name string) *recipe.Latch {
	t.Helper()
	l, err := recipe.NewLatch(bg(), b, name)
	return closeAtEnd(t, "NewLatch", l, err)
}

// Goroutines of several Backends count down concurrently: no count is
// lost or taken twice, and no Await returns before the last CountDown.
func testLatchHammer(t *testing.T, e *env) {
	const members, each = 6, 20
	name := e.name(t)
	bs := []baton.Backend{e.open(t), e.open(t)}
	l := e.latch(t, bs[0], name)
	if _, err := l.TrySetCount(bg(), 0); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("TrySetCount(0): %v, want ErrInvalidArgument", err)
	}
	set, err := l.TrySetCount(bg(), members*each)
	ok(t, "TrySetCount", err)
	if !set {
		t.Fatal("TrySetCount of a new latch did nothing")
	}
	if set, err := l.TrySetCount(bg(), 5); set || err != nil {
		t.Fatalf("TrySetCount of a latch still counting: %v, %v", set, err)
	}
	var counted sync.WaitGroup // Done by each CountDown once it returned
	counted.Add(members * each)
	allCounted := make(chan struct{})
	go func() { counted.Wait(); close(allCounted) }()
	var awaiters sync.WaitGroup
	for i := range 4 {
		al := e.latch(t, bs[i%2], name)
		awaiters.Go(func() {
			ok(t, "Await", al.Await(ctx20(t)))
			select {
			case <-allCounted:
			default:
				// Await may return before the last CountDown itself has
				// returned, but the count must be zero.
				if c, err := al.Count(bg()); err != nil || c != 0 {
					t.Errorf("Await returned at count %d (%v)", c, err)
				}
			}
		})
	}
	// An Await with a context that ends returns its error.
	ctx, cancel := context.WithTimeout(bg(), 50*time.Millisecond)
	if err := l.Await(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Await of a latch counting, context ended: %v", err)
	}
	cancel()
	var wg sync.WaitGroup
	for i := range members {
		ml := e.latch(t, bs[i%2], name)
		wg.Go(func() {
			for range each {
				if err := ml.CountDown(bg()); err != nil {
					t.Errorf("CountDown: %v", err)
				}
				counted.Done()
			}
		})
	}
	wg.Wait()
	within(t, 20*time.Second, "Await after the last CountDown", awaiters.Wait)
	c, err := l.Count(bg())
	ok(t, "Count", err)
	if c != 0 {
		t.Errorf("count %d after %d CountDowns of %d", c, members*each, members*each)
	}
	ok(t, "CountDown at zero", l.CountDown(bg()))
	if c, _ := l.Count(bg()); c != 0 {
		t.Errorf("CountDown at zero made the count %d", c)
	}
	set, err = l.TrySetCount(bg(), 2)
	if !set || err != nil {
		t.Errorf("TrySetCount of a latch counted down: %v, %v", set, err)
	}
}

// roleCountdown counts the latch named arg down, saying "counted" after
// each CountDown returned, until it is zero or the helper is killed.
func roleCountdown(e *env, arg string) error {
	b, err := e.s.Open(e.cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	l, err := recipe.NewLatch(bg(), b, arg)
	if err != nil {
		return err
	}
	for {
		if c, err := l.Count(bg()); err != nil || c == 0 {
			return err
		}
		if err := l.CountDown(bg()); err != nil {
			return err
		}
		fmt.Println("counted")
		time.Sleep(time.Millisecond)
	}
}

// Members SIGKILLed while counting down: every CountDown that returned
// counted, the one the kill interrupted counted once or not at all, and
// the latch still opens for the members that remain.
func testLatchKill(t *testing.T, e *env) {
	const total = 300
	name := e.name(t)
	l := e.latch(t, e.open(t), name)
	_, err := l.TrySetCount(bg(), total)
	ok(t, "TrySetCount", err)
	confirmed, inFlight := 0, 0
	for round := range 3 {
		p := e.spawn(t, "countdown", name)
		p.expect(t, "counted", 30*time.Second)
		confirmed++
		time.Sleep(time.Duration(20+round*15) * time.Millisecond)
		p.kill()
		for range p.lines {
			confirmed++
		}
		inFlight++
	}
	c, err := l.Count(bg())
	ok(t, "Count", err)
	done := total - int64(c)
	if done < int64(confirmed) || done > int64(confirmed+inFlight) {
		t.Fatalf("count %d after %d confirmed CountDowns and %d cut by a kill", c, confirmed, inFlight)
	}
	t.Logf("%d CountDowns confirmed, %d counted", confirmed, done)
	// The survivor finishes the count; the latch opens.
	awaited := make(chan error, 1)
	go func() { awaited <- l.Await(ctx20(t)) }()
	for range c {
		ok(t, "CountDown", l.CountDown(bg()))
	}
	returns(t, 20*time.Second, "Await after the count reached zero", awaited)
}

// Waiters of a set barrier return when it is removed, not before.
func testBarrier(t *testing.T, e *env) {
	name := e.name(t)
	bs := []baton.Backend{e.open(t), e.open(t)}
	br, err := recipe.NewBarrier(bg(), bs[0], name)
	ok(t, "NewBarrier", err)
	defer br.Close()
	ok(t, "Wait on a barrier never set", br.Wait(ctx20(t)))
	ok(t, "Set", br.Set(bg()))
	ok(t, "Set again", br.Set(bg()))
	gone := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 5 {
		w, err := recipe.NewBarrier(bg(), bs[i%2], name)
		ok(t, "NewBarrier", err)
		defer w.Close()
		wg.Go(func() {
			ok(t, "Wait", w.Wait(ctx20(t)))
			select {
			case <-gone:
			default:
				t.Error("Wait returned while the barrier was set")
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(gone)
	ok(t, "Remove", br.Remove(bg()))
	within(t, 20*time.Second, "Wait after Remove", wg.Wait)
}
