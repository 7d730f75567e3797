//go:build linux

package shmqueue

import "github.com/batonlock/baton/ipc"

// Wake-ups. A claimant about to sleep counts itself in offSleepers (under
// the lock, where it also reads the futex word), and takes itself off when
// its sleep ends. A waker wakes only sleepers that no wake-up is on its
// way to yet: offWoken counts the wake-ups sent to sleepers still counted,
// and a waker raises it by the k it wakes before its futex wake. So a run
// of Puts to a claimant that is waking up makes one system call, not one
// per job; with no sleeper, none.
//
// Every sleeper whose sleep ends (woken, or its futex word moved before it
// slept, or a timeout or a signal) takes one off offWoken, if it is not 0,
// before it takes itself off offSleepers: in between, a waker may only
// wake one sleeper too many, which looks again and sleeps. offWoken thus
// never exceeds the sleepers whose sleep is ending, and a sleeper that
// needs a wake-up always gets one. A claimant killed while counted leaves
// its count behind: wakers then make one futex wake for it that wakes
// nobody, not one per change.

// wake wakes up to n sleeping claimants (n < 0: all of them) that no
// wake-up is on its way to; after the change they must see was made.
func (q *Queue) wake(n int) {
	woken := q.u32(offWoken)
	for {
		w := woken.Load()
		s := q.u32(offSleepers).Load()
		if s <= w {
			return
		}
		k := s - w
		if n > 0 && q.u32(offSpinner).Load() != 0 && q.spinning() {
			// The spinning claimant takes one of the jobs.
			if n--; n == 0 {
				return
			}
		}
		if n >= 0 && uint32(n) < k {
			k = uint32(n)
		}
		if woken.CompareAndSwap(w, w+k) {
			_, _ = ipc.FutexWake(q.seqWord(), int(k))
			return
		}
	}
}

// leave ends the count of a sleep that ended.
func (q *Queue) leave() {
	woken := q.u32(offWoken)
	for {
		w := woken.Load()
		if w == 0 || woken.CompareAndSwap(w, w-1) {
			break
		}
	}
	q.u32(offSleepers).Add(^uint32(0))
}
