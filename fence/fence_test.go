package fence_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
)

func TestGuardRules(t *testing.T) {
	var g fence.Guard
	if h := g.Highest(); h != 0 {
		t.Fatalf("zero Guard: Highest %d", h)
	}
	if err := g.Check(0); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Check(0): %v, want ErrInvalidArgument", err)
	}
	if err := g.Do(3, nil); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Do with nil fn: %v, want ErrInvalidArgument", err)
	}
	if h := g.Highest(); h != 0 {
		t.Errorf("refused arguments changed the guard: Highest %d", h)
	}
	writes := 0
	write := func() error { writes++; return nil }
	if err := g.Do(5, write); err != nil {
		t.Fatal(err)
	}
	if err := g.Do(5, write); err != nil {
		t.Errorf("the same holder writing twice: %v", err)
	}
	err := g.Do(4, write)
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.Is(err, baton.ErrLost) || !errors.As(err, &se) ||
		se.Token != 4 || se.Highest != 5 {
		t.Errorf("Do(4) after 5: %v, want a StaleError{4, 5} matching ErrStale and ErrLost", err)
	}
	if writes != 2 {
		t.Errorf("%d writes ran, want 2: a stale write ran", writes)
	}
	if err := g.Check(3); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Check(3) after 5: %v", err)
	}
	failed := errors.New("disk full")
	if err := g.Do(9, func() error { return failed }); err != failed {
		t.Errorf("Do returned %v, want fn's error", err)
	}
	if err := g.Check(8); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Check(8) after a failed write with 9: %v; the token must stay recorded", err)
	}
	if h := g.Highest(); h != 9 {
		t.Errorf("Highest %d, want 9", h)
	}
}

// TestGuardHammer: goroutines write with tokens that mostly increase; the
// writes that ran must have run one at a time (the log is not locked: the
// race detector sees any overlap) and in non-decreasing token order, and
// every refusal must name a token lower than one that ran before.
func TestGuardHammer(t *testing.T) {
	const goroutines, per = 16, 2000
	var g fence.Guard
	var log []baton.Token // written only inside Do
	var next atomic.Uint64
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				// A token drawn a little while ago: some are overtaken.
				n := int64(next.Add(1))
				if rand.IntN(4) == 0 {
					n -= int64(rand.IntN(goroutines * 2))
				}
				tok := baton.Token(max(1, n))
				err := g.Do(tok, func() error {
					log = append(log, tok)
					return nil
				})
				var se *fence.StaleError
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.As(err, &se):
					if se.Token != tok || se.Highest <= tok {
						errs <- err
						return
					}
					refused.Add(1)
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if int64(len(log)) != accepted.Load() {
		t.Errorf("%d writes logged, %d accepted", len(log), accepted.Load())
	}
	for i := 1; i < len(log); i++ {
		if log[i] < log[i-1] {
			t.Fatalf("write %d ran with token %d after a write with %d", i, log[i], log[i-1])
		}
	}
	if len(log) > 0 && g.Highest() != log[len(log)-1] {
		t.Errorf("Highest %d, last write %d", g.Highest(), log[len(log)-1])
	}
	if refused.Load() == 0 {
		t.Errorf("no write was refused: the test did not exercise stale tokens")
	}
	t.Logf("%d accepted, %d refused", accepted.Load(), refused.Load())
}
