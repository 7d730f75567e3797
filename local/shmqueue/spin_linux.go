//go:build linux

package shmqueue

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/internal/word"
)

// spinCheck is the loads of a spin between two looks at the clock, which
// costs as much as a few dozen loads.
const spinCheck = 32

// spinLock looks at the lock word w until it is free or lockSpin has
// passed, and reports whether it is free. With one P the holder may be a
// goroutine of this process queued behind this one: it lets it run.
func (q *Queue) spinLock(w *word.Uint64) bool {
	one := runtime.GOMAXPROCS(0) == 1
	var start time.Time
	for i := 1; ; i++ {
		if w.Load() == 0 {
			return true
		}
		if one {
			runtime.Gosched()
		}
		if i%spinCheck == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > lockSpin {
				return false
			}
		}
	}
}

// A claimant that finds no job ready looks at the claimants' futex word
// for a while before it sleeps: in a flow of jobs the next one comes
// sooner than a futex sleep and wake-up would take, and a waker that
// finds the claimant spinning makes no system call. One claimant of a
// queue spins at a time, so that claimants waiting together do not take
// the CPUs their producers need. The spin lasts up to emptyLong, or only
// emptyShort once the last failStreak spins of the handle all ran out
// (jobs come seldom), except that every probeEvery-th one spins emptyLong
// all the same, to find out whether they come often again. Either way it
// is bounded: an idle claimant sleeps in the kernel.
const (
	emptyShort = 500 * time.Nanosecond
	emptyLong  = 20 * time.Microsecond
	failStreak = 8
	probeEvery = 32
	// The spinner's word holds the time its spin ends, in units of
	// 1<<spinUnit ns (about a millisecond), past any spin: a spinner
	// killed in its spin leaves a word that the next one takes over
	// once its time is past.
	spinUnit = 20
)

// spinner counts the spins of a handle that ran out in a row.
type spinner struct{ fails, waits atomic.Int64 }

// spinEmpty spins on the futex word while it reads seq, unless another
// claimant spins, and reports whether it moved. With one P it does not
// spin: the producer may be a goroutine of this process, which the spin
// would keep from running.
func (q *Queue) spinEmpty(seq uint32) bool {
	if runtime.GOMAXPROCS(0) == 1 {
		return false
	}
	limit := emptyLong
	if q.spin.fails.Load() >= failStreak && q.spin.waits.Add(1)%probeEvery != 0 {
		limit = emptyShort
	}
	start := time.Now()
	sw := q.u32(offSpinner)
	mine := max(uint32(start.UnixNano()>>spinUnit)+2, 1)
	if cur := sw.Load(); (cur != 0 && !q.spinStale(cur, start)) || !sw.CompareAndSwap(cur, mine) {
		return false
	}
	defer sw.CompareAndSwap(mine, 0)
	w := q.u32(offSeq)
	for i := 1; ; i++ {
		if w.Load() != seq {
			sw.CompareAndSwap(mine, 0) // the spin is over: wakers count it no more
			if q.spin.fails.Load() != 0 {
				q.spin.fails.Store(0)
			}
			return true
		}
		if i%spinCheck == 0 && time.Since(start) > limit {
			q.spin.fails.Add(1)
			return false
		}
	}
}

// spinStale reports whether the spinner's word cur is past its time at
// now.
func (q *Queue) spinStale(cur uint32, now time.Time) bool {
	return int32(uint32(now.UnixNano()>>spinUnit)-cur) > 0
}
