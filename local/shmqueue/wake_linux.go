//go:build linux

package shmqueue

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/batonlock/baton/ipc"
	"golang.org/x/sys/unix"
)

// Wake-ups. offSleepers counts the claimants that sleep, or are about to,
// on the futex word offSeq and that no wake-up reached yet: a claimant
// counts itself before its futex wait looks at the word, and the count
// goes down once per sleep, by whoever ends it. A waker takes off as many
// as its futex wake woke (the kernel removed them from the futex's queue);
// a sleep that ends otherwise (the word had moved, a timeout, a signal) is
// taken off by the sleeper. So a run of Puts to a claimant that is waking
// up makes one system call, not one per job, and a claimant counted but
// not yet asleep, which the waker's futex wake did not reach, stays
// counted for the next one. (A waker's count is read after its change to
// offSeq, and a sleeper's futex wait reads offSeq after its count: either
// the sleeper finds the word moved or the waker finds it counted.)
//
// A claimant killed while counted leaves its count behind: wakers then
// make a futex wake that wakes nobody, at every change, as before the
// count was exact.

// futexWait is FUTEX_WAIT, shared (not _PRIVATE): the word is in a mapping
// of several processes.
const futexWait = 0

// wake wakes up to n sleeping claimants (n < 0: all of them), after the
// change they must see was made. A spinning claimant takes one job of n:
// the waker that counts on it clears its word, so that the next change
// wakes a sleeper (a spinner that the system stopped might otherwise be
// counted on for every job put meanwhile).
func (q *Queue) wake(n int) {
	s := q.u32(offSleepers)
	if s.Load() == 0 {
		return
	}
	if sw := q.u32(offSpinner); n > 0 {
		if cur := sw.Load(); cur != 0 && !q.spinStale(cur, time.Now()) && sw.CompareAndSwap(cur, 0) {
			if n--; n == 0 {
				return
			}
		}
	}
	q.wakeSleepers(n)
}

// wakeSleepers makes the futex wake of n sleepers (n < 0: all) and takes
// the ones it woke off the count.
func (q *Queue) wakeSleepers(n int) {
	if n < 0 {
		n = 1<<31 - 1
	}
	if k, err := ipc.FutexWake(q.seqWord(), n); err == nil && k > 0 {
		q.u32(offSleepers).Add(-uint32(k))
	}
}

// sleep sleeps on the futex word while it reads seq, at most timeout (< 0:
// no limit), counted in offSleepers, and takes its count off unless a
// waker did.
func (q *Queue) sleep(seq uint32, timeout time.Duration) error {
	q.u32(offSleepers).Add(1)
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(q.seqWord())), futexWait, uintptr(seq), uintptr(unsafe.Pointer(ts)), 0, 0)
	switch e {
	case 0:
		return nil // a waker's futex wake ended it, and took it off
	case unix.EAGAIN, unix.EINTR, unix.ETIMEDOUT:
		q.u32(offSleepers).Add(^uint32(0))
		return nil
	}
	q.u32(offSleepers).Add(^uint32(0))
	return fmt.Errorf("shmqueue: futex wait: %w", e)
}
