package closing

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestFirstOneWinner: of many concurrent Closes, exactly one wins and runs
// take, every time; take runs under the mutex, with *closed already set.
func TestFirstOneWinner(t *testing.T) {
	const rounds, closers = 200, 64
	for range rounds {
		var (
			mu     sync.Mutex
			closed bool
			wins   atomic.Int32
			takes  int // guarded by mu
			start  = make(chan struct{})
			wg     sync.WaitGroup
		)
		for range closers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if First(&mu, &closed, func() {
					if !closed || mu.TryLock() {
						t.Error("take ran unlocked or before closed was set")
					}
					takes++
				}) {
					wins.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || takes != 1 {
			t.Fatalf("%d winners, take ran %d times; want 1 and 1", wins.Load(), takes)
		}
		if First(&mu, &closed, nil) {
			t.Fatal("a Close after the first won")
		}
		if !mu.TryLock() {
			t.Fatal("the mutex stays locked after First")
		}
	}
}

// TestFirstNilTake: take may be nil.
func TestFirstNilTake(t *testing.T) {
	var mu sync.Mutex
	var closed bool
	if !First(&mu, &closed, nil) || !closed {
		t.Fatal("the first Close did not win")
	}
	if First(&mu, &closed, nil) {
		t.Fatal("the second Close won")
	}
}
