package baton

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// eventLog records events, for the tests of the observer.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) Observe(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) count(t EventType) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Type == t {
			n++
		}
	}
	return n
}

// TestObservePassAndLoss: a hold passed between two handles of a Backend
// is reported as EventPassed, and the Unlock of the passed hold after its
// lease was lost as EventLost and an EventError of class "lost".
func TestObservePassAndLoss(t *testing.T) {
	// The hold must still be young enough to pass when the second Lock
	// has queued, however slowly this machine schedules it.
	defer func(d time.Duration) { passFor = d }(passFor)
	passFor = time.Minute
	s := newPassServer()
	b, ms, _ := openPass(t, s, "x", 2)
	var log eventLog
	if err := Observe(b, &log); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ms[0].Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := ms[1].Lock(ctx)
		got <- err
	}()
	waitFor(t, func() bool { return lineLen(ms[0]) == 1 })
	if err := ms[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if s.passes.Load() != 1 || log.count(EventPassed) != 1 {
		t.Fatalf("%d passes, %d EventPassed; want 1 and 1", s.passes.Load(), log.count(EventPassed))
	}
	if !s.lose("x") {
		t.Fatal("nothing to lose")
	}
	if err := ms[1].Unlock(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("Unlock of a lost hold: %v", err)
	}
	if n := log.count(EventLost); n != 1 {
		t.Errorf("%d EventLost, want 1", n)
	}
	var lostErrs int
	log.mu.Lock()
	for _, e := range log.events {
		if e.Type == EventError && ErrorClass(e.Err) == "lost" && e.Backend == "pass" && e.Name == "x" && e.Kind == KindMutex {
			lostErrs++
		}
	}
	log.mu.Unlock()
	if lostErrs != 1 {
		t.Errorf("%d EventError of class lost, want 1", lostErrs)
	}
	if a, r := log.count(EventAcquired), log.count(EventReleased); a != 2 || r != 1 {
		t.Errorf("%d EventAcquired, %d EventReleased; want 2 and 1", a, r)
	}
}

// TestObserveForeign: Observe refuses a Backend the core did not make.
func TestObserveForeign(t *testing.T) {
	type other struct{ Backend }
	if err := Observe(other{}, &eventLog{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Observe of a foreign Backend: %v, want ErrInvalidArgument", err)
	}
}
