//go:build linux

package shmchan

import (
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/internal/word"
)

// A waiter looks at its slot for a while before it sleeps: when both ends
// run, the peer's next step comes sooner than a futex sleep and wake-up
// would. The spin lasts up to spinLong, or only spinShort once the last
// failStreak spins of the handle's side all ran out: where the peer
// seldom gets a CPU soon, the waiter goes to sleep nearly at once instead
// of taking the CPU the peer needs. Every probeEvery-th short wait spins
// spinProbe all the same, to find out whether the peer answers soon again.
// A probe outlasts a wake-up from sleep: when both ends spin short, each
// one's answer waits for the other's wake-up, which no spin of spinLong
// outlasts, and both would sleep at every message for good. Either way
// the spin is bounded: a blocked end sleeps in the kernel.
const (
	spinShort  = 250 * time.Nanosecond
	spinLong   = 8 * time.Microsecond
	spinProbe  = 100 * time.Microsecond
	failStreak = 8
	probeEvery = 32
	spinCheck  = 64 // loads between two looks at the clock
)

// spinner counts the spins of one side of a handle that ran out in a row,
// and the waits, for the probes.
type spinner struct{ fails, waits atomic.Int64 }

// spin looks at st until it is no longer v or the limit has passed, and
// reports whether it changed.
func (s *spinner) spin(st *word.Uint64, v uint64) bool {
	limit := s.next()
	var start time.Time
	for i := 1; ; i++ {
		if st.Load() != v {
			if s.fails.Load() != 0 {
				s.fails.Store(0)
			}
			return true
		}
		if i%spinCheck == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > limit {
				s.fails.Add(1)
				return false
			}
		}
	}
}

// next returns the limit of the next spin.
func (s *spinner) next() time.Duration {
	if s.fails.Load() < failStreak {
		return spinLong
	}
	if s.waits.Add(1)%probeEvery != 0 {
		return spinShort
	}
	return spinProbe
}
