package recipetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/recipe"
)

func (e *env) permits(t testing.TB, b baton.Backend, name string, capacity int) *recipe.PermitSemaphore {
	t.Helper()
	s, err := recipe.NewPermitSemaphore(bg(), b, name, capacity)
	return closeAtEnd(t, "NewPermitSemaphore", s, err)
}

// Bad input is refused before anything is written: the name opens with
// any capacity afterwards.
func testPermitBadInput(t *testing.T, e *env) {
	b, name := e.open(t), e.name(t)
	for _, c := range []int{0, -1, recipe.MaxPermits + 1} {
		if _, err := recipe.NewPermitSemaphore(bg(), b, name, c); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("capacity %d: %v", c, err)
		}
	}
	s := e.permits(t, b, name, 2)
	if _, err := recipe.NewPermitSemaphore(bg(), b, name, 3); !errors.Is(err, baton.ErrMismatch) {
		t.Errorf("another capacity: %v", err)
	} else if me := (*baton.MismatchError)(nil); !errors.As(err, &me) || me.Have != 2 || me.Want != 3 {
		t.Errorf("another capacity: %v, want a MismatchError of 2, not 3", err)
	}
	if _, err := s.Acquire(bg(), 0); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Acquire with lease 0: %v", err)
	}
	if _, err := s.TryAcquire(bg(), -time.Second); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("TryAcquire with a negative lease: %v", err)
	}
	for _, id := range []string{"", "xyz", "0011"} {
		if err := s.Release(bg(), id); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Release(%q): %v", id, err)
		}
	}
	if err := s.Release(bg(), "0123456789abcdef"); !errors.Is(err, baton.ErrNotHeld) {
		t.Errorf("Release of an unknown permit: %v", err)
	}
	if ps, err := s.Permits(bg()); len(ps) != 0 || err != nil {
		t.Errorf("permits after the refusals: %v, %v", ps, err)
	}
}

// Permits are released by id from another process's handle, and a
// released or expired permit is no longer held.
func testPermitRelease(t *testing.T, e *env) {
	name := e.name(t)
	a, b := e.permits(t, e.open(t), name, 2), e.permits(t, e.open(t), name, 2)
	p1, err := a.TryAcquire(bg(), time.Minute)
	ok(t, "TryAcquire", err)
	p2, err := a.Acquire(ctx20(t), time.Minute)
	ok(t, "Acquire", err)
	if p1.ID == p2.ID {
		t.Fatalf("two permits with id %s", p1.ID)
	}
	if _, err := b.TryAcquire(bg(), time.Minute); !errors.Is(err, baton.ErrLocked) {
		t.Errorf("TryAcquire beyond the capacity: %v", err)
	}
	ok(t, "Release from another handle", b.Release(bg(), p1.ID))
	if err := a.Release(bg(), p1.ID); !errors.Is(err, baton.ErrNotHeld) {
		t.Errorf("a second Release: %v", err)
	}
	p3, err := b.TryAcquire(bg(), time.Minute)
	ok(t, "TryAcquire after a Release", err)
	ps, err := a.Permits(bg())
	if err != nil || len(ps) != 2 || ps[0].ID != p2.ID || ps[1].ID != p3.ID {
		t.Errorf("permits %v, %v; want %s and %s", ps, err, p2.ID, p3.ID)
	}
	// A cancelled Acquire takes nothing.
	ctx, cancel := context.WithTimeout(bg(), 200*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire on a full semaphore until its context ends: %v", err)
	}
	if ps, _ := a.Permits(bg()); len(ps) != 2 {
		t.Errorf("%d permits after a cancelled Acquire", len(ps))
	}
}

// A lease that ends gives its permit back by itself, to a waiting Acquire;
// Extend keeps it.
func testPermitExpiry(t *testing.T, e *env) {
	name := e.name(t)
	a, b := e.permits(t, e.open(t), name, 1), e.permits(t, e.open(t), name, 1)
	p, err := a.TryAcquire(bg(), 500*time.Millisecond)
	ok(t, "TryAcquire", err)
	end, err := a.Extend(bg(), p.ID, 1500*time.Millisecond)
	ok(t, "Extend", err)
	start := time.Now()
	q, err := b.Acquire(ctx20(t), time.Minute)
	ok(t, "Acquire", err)
	if d := time.Since(start); d < 1200*time.Millisecond || d > 10*time.Second {
		t.Errorf("a waiting Acquire got the permit after %v, want its extended lease, 1.5 s", d)
	}
	if time.Now().Before(end) {
		t.Errorf("the permit was given before its lease ended")
	}
	if _, err := a.Extend(bg(), p.ID, time.Minute); !errors.Is(err, baton.ErrNotHeld) {
		t.Errorf("Extend of an expired permit: %v", err)
	}
	ok(t, "Release", b.Release(bg(), q.ID))
}

// rolePermitHold takes a permit of the semaphore in arg ("name lease"),
// says "permit ID", and sleeps until killed.
func rolePermitHold(e *env, arg string) error {
	var name string
	var ms int64
	if _, err := fmt.Sscan(arg, &name, &ms); err != nil {
		return err
	}
	b, err := e.s.Open(e.cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	s, err := recipe.NewPermitSemaphore(bg(), b, name, 1)
	if err != nil {
		return err
	}
	p, err := s.Acquire(bg(), time.Duration(ms)*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Println("permit", p.ID)
	select {}
}

// A holder killed with its permit: the permit comes back when its lease
// ends, not before.
func testPermitKill(t *testing.T, e *env) {
	name := e.name(t)
	p := e.spawn(t, "permithold", name+" "+strconv.Itoa(1000))
	p.expect(t, "permit", 30*time.Second)
	took := time.Now()
	p.kill()
	s := e.permits(t, e.open(t), name, 1)
	if _, err := s.TryAcquire(bg(), time.Minute); !errors.Is(err, baton.ErrLocked) && time.Since(took) < 900*time.Millisecond {
		t.Errorf("TryAcquire right after the kill: %v, want ErrLocked", err)
	}
	_, err := s.Acquire(ctx20(t), time.Minute)
	ok(t, "Acquire after the holder died", err)
	t.Logf("permit back %v after it was taken", time.Since(took))
}

// Eight goroutines on two backends take and give back permits of a
// capacity of three: never more than three held at once.
func testPermitHammer(t *testing.T, e *env) {
	const capacity = 3
	name := e.name(t)
	bs := []baton.Backend{e.open(t), e.open(t)}
	var held, most, taken atomic.Int32
	end := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for i := range 8 {
		s := e.permits(t, bs[i%2], name, capacity)
		wg.Go(func() {
			for time.Now().Before(end) {
				p, err := s.Acquire(ctx20(t), time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				taken.Add(1)
				time.Sleep(5 * time.Millisecond)
				held.Add(-1)
				if err := s.Release(bg(), p.ID); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > capacity || taken.Load() == 0 {
		t.Errorf("%d permits held at once at most (capacity %d), %d taken", most.Load(), capacity, taken.Load())
	}
	t.Logf("%d permits taken, at most %d at once", taken.Load(), most.Load())
}
