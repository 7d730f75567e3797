package lease

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// countFires counts how often a Loss told its watcher.
type countFires struct{ n atomic.Int32 }

func (c *countFires) LossFired(error) { c.n.Add(1) }

func watched() (*driver.Loss, *countFires) {
	l, c := driver.NewLoss(), &countFires{}
	l.Watch(c)
	return l, c
}

// TestSessionEndFiresEachOnce: End fires every tracked Loss once with its
// cause, however many End at once; a Loss tracked afterwards fires at
// once; Done is closed and Err is the first cause.
func TestSessionEndFiresEachOnce(t *testing.T) {
	s := NewSession[int](time.Now().Add(time.Minute), SessionConfig{})
	var ls []*driver.Loss
	var cs []*countFires
	for i := range 50 {
		l, c := watched()
		s.Track(l, i)
		ls, cs = append(ls, l), append(cs, c)
	}
	cause := errors.New("cut off")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { s.End(cause) })
	}
	wg.Wait()
	s.End(errors.New("later"))
	for i, l := range ls {
		if err := l.Err(); !errors.Is(err, cause) || !errors.Is(err, baton.ErrLost) || cs[i].n.Load() != 1 {
			t.Fatalf("loss %d: %v, told %d times", i, err, cs[i].n.Load())
		}
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after End")
	}
	if err := s.Err(); err != cause {
		t.Fatalf("Err %v, want the first cause", err)
	}
	late := driver.NewLoss()
	s.Track(late, 0)
	if !errors.Is(late.Err(), cause) {
		t.Fatalf("a Loss tracked after End: %v", late.Err())
	}
}

// TestSessionHammer: goroutines track, pass and untrack holds, and one
// extends the deadline, while the session ends; afterwards every hold still tracked has fired with the
// cause, exactly once, and every hold given back has no deadline left
// (it fired only if End came first).
func TestSessionHammer(t *testing.T) {
	for round := range 20 {
		s := NewSession[int](time.Now().Add(time.Minute), SessionConfig{})
		cause := errors.New("round over")
		type hold struct {
			l    *driver.Loss
			c    *countFires
			kept bool
		}
		var mu sync.Mutex
		var holds []*hold
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				<-start
				for range 200 {
					l, c := watched()
					s.Track(l, g)
					h := &hold{l: l, c: c, kept: true}
					if r.IntN(2) == 0 {
						nl, nc := watched()
						if s.Pass(l, nl, 0) {
							h = &hold{l: nl, c: nc, kept: true}
						}
					}
					if r.IntN(3) == 0 {
						s.Untrack(h.l)
						h.kept = false
					}
					mu.Lock()
					holds = append(holds, h)
					mu.Unlock()
				}
			})
		}
		// Renewals and reads race with the holds and the end.
		wg.Go(func() {
			<-start
			for s.Extend(time.Now().Add(time.Minute)) && s.Err() == nil {
				s.FireIf(func(int) bool { return false }, cause)
			}
		})
		close(start)
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		s.End(cause)
		wg.Wait()
		for i, h := range holds {
			n := h.c.n.Load()
			switch {
			case n > 1:
				t.Fatalf("round %d hold %d: told %d times", round, i, n)
			case h.kept && (n != 1 || !errors.Is(h.l.Err(), cause)):
				t.Fatalf("round %d hold %d kept: %v, told %d times", round, i, h.l.Err(), n)
			case !h.kept && n == 1 && !errors.Is(h.l.Err(), cause):
				t.Fatalf("round %d hold %d given back fired with %v", round, i, h.l.Err())
			}
		}
	}
}

// TestSessionDeadlineMoves: Extend moves the deadline of the session and
// of every Loss later, never earlier; SetDeadline moves it either way; a
// session whose deadline passed ends with the Expired cause, by its timer
// or on a read, and an Extend then does not revive it.
func TestSessionDeadlineMoves(t *testing.T) {
	expired := errors.New("no heartbeat")
	dl := time.Now().Add(150 * time.Millisecond)
	s := NewSession[struct{}](dl, SessionConfig{Expired: expired})
	l := driver.NewLoss()
	s.Track(l, struct{}{})
	if !s.Extend(dl.Add(-time.Millisecond)) || !s.Deadline().Equal(dl) {
		t.Fatalf("Extend to an earlier time moved the deadline to %v", s.Deadline())
	}
	later := time.Now().Add(400 * time.Millisecond)
	if !s.Extend(later) || !s.Deadline().Equal(later) {
		t.Fatal("Extend did not move the deadline")
	}
	time.Sleep(time.Until(dl) + 20*time.Millisecond)
	if err := l.Err(); err != nil {
		t.Fatalf("the Loss fired at the old deadline: %v", err)
	}
	s.SetDeadline(time.Now().Add(30 * time.Millisecond))
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the session outlived a deadline moved earlier")
	}
	// The Loss fires with the cause, or on its own read past the deadline
	// when that comes first.
	if err := s.Err(); !errors.Is(err, expired) || !errors.Is(l.Err(), baton.ErrLost) {
		t.Fatalf("after the deadline: session %v (want the Expired cause), Loss %v", err, l.Err())
	}
	if s.Extend(time.Now().Add(time.Minute)) {
		t.Fatal("Extend revived an ended session")
	}

	// Past the deadline but before its timer runs, a read ends it.
	s = NewSession[struct{}](time.Now().Add(time.Millisecond), SessionConfig{})
	s.mu.Lock()
	s.expire.Stop() // a timer that runs late
	s.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	if err := s.Err(); !errors.Is(err, ErrExpired) {
		t.Fatalf("Err past the deadline: %v, want ErrExpired", err)
	}
	l = driver.NewLoss()
	s.Track(l, struct{}{})
	if !errors.Is(l.Err(), ErrExpired) {
		t.Fatalf("a hold tracked on an expired session: %v", l.Err())
	}
}

// TestSessionPassAndFireIf: Pass moves a hold to a new Loss with the
// deadline, and refuses when too little is left, when the old Loss is not
// tracked, or when FireIf fired it; FireIf fires only the matching holds
// and leaves them tracked, so End does not tell them again.
func TestSessionPassAndFireIf(t *testing.T) {
	s := NewSession[string](time.Now().Add(time.Minute), SessionConfig{})
	a, b := driver.NewLoss(), driver.NewLoss()
	s.Track(a, "dir/a")
	s.Track(b, "other/b")
	if s.Pass(a, driver.NewLoss(), 2*time.Minute) {
		t.Fatal("passed with less left than asked")
	}
	a2 := driver.NewLoss()
	if !s.Pass(a, a2, time.Second) || s.Pass(a, driver.NewLoss(), 0) {
		t.Fatal("Pass of a tracked hold refused, or of an untracked one accepted")
	}
	removed := errors.New("removed")
	s.FireIf(func(k string) bool { return k == "dir/a" }, removed)
	if !errors.Is(a2.Err(), removed) || b.Err() != nil || a.Err() != nil {
		t.Fatalf("FireIf: a2 %v, b %v, a (passed on) %v", a2.Err(), b.Err(), a.Err())
	}
	if s.Pass(a2, driver.NewLoss(), 0) {
		t.Fatal("a fired hold was passed on")
	}
	s.End(errors.New("closed"))
	if !errors.Is(a2.Err(), removed) || b.Err() == nil {
		t.Fatalf("after End: a2 %v, b %v", a2.Err(), b.Err())
	}
}

// TestSessionRenewal: the Renewal loop extends the deadline on each
// renewal, retries a failed one sooner than the period, ends the session
// with the bare cause of Gone, and Stop ends it without firing its Loss.
func TestSessionRenewal(t *testing.T) {
	gone := errors.New("lease 1f not found")
	var mode atomic.Int32 // 0 renew, 1 fail, 2 gone
	calls := make(chan time.Time, 100)
	s := NewSession[struct{}](time.Now().Add(2*time.Second), SessionConfig{Renewal: Renewal{
		First: time.Now(), Every: 800 * time.Millisecond, Timeout: time.Second, RetryFloor: time.Millisecond,
		Renew: func(ctx context.Context, _ time.Time) (time.Time, error) {
			calls <- time.Now()
			switch mode.Load() {
			case 1:
				return time.Time{}, errors.New("refused")
			case 2:
				return time.Time{}, Gone(gone)
			}
			return time.Now().Add(10 * time.Second), nil
		},
	}})
	l := driver.NewLoss()
	s.Track(l, struct{}{})
	<-calls
	mode.Store(1)
	for deadline := time.Now().Add(9 * time.Second); s.Deadline().Before(time.Now().Add(5 * time.Second)); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first renewal did not extend the deadline")
		}
	}
	<-calls // the first failure, a period after the renewal
	a, b := <-calls, <-calls
	if gap := b.Sub(a); gap > 400*time.Millisecond {
		t.Fatalf("failed renewals retried %v apart, want about 100 ms (period/8)", gap)
	}
	mode.Store(2)
	<-l.Done() // fired after the session's Done closed
	if err := s.Err(); err != gone || !errors.Is(l.Err(), gone) {
		t.Fatalf("Err %v, Loss %v: want the bare cause of Gone", err, l.Err())
	}

	s = NewSession[struct{}](time.Now().Add(time.Minute), SessionConfig{Renewal: Renewal{
		First: time.Now().Add(time.Hour), Every: time.Hour, Timeout: time.Second,
		Renew: func(context.Context, time.Time) (time.Time, error) { return time.Time{}, nil },
	}})
	l = driver.NewLoss()
	s.Track(l, struct{}{})
	s.Stop()
	if l.Err() != nil || s.Err() == nil {
		t.Fatalf("after Stop: Loss %v, session %v", l.Err(), s.Err())
	}
}
