//go:build linux

package shmqueue

import (
	"context"
	"slices"
	"time"

	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/ipc"
)

const (
	fLockWait = 1 << 30 // in the lock word: a waiter may sleep on it
	pidMask   = 1<<22 - 1
	// deadCheck is how long a waiter for the lock sleeps before it looks
	// at the owner again: the lock is held for the time of a copy, so a
	// slice that ends with the same owner is rare unless it died.
	deadCheck = time.Millisecond
	// lockSpin is how long a waiter for the lock looks at it before it
	// sleeps: a holder on another CPU is done within that, sooner than a
	// futex sleep and wake-up would be; one that is not running is not.
	lockSpin = 4 * time.Microsecond
)

// lock takes the queue's lock for the calling process and prepares the
// state for a change: after a takeover from a dead owner it rebuilds what
// the slot words imply, and it makes delayed jobs that are due ready. It
// returns whether waiters must be told (jobs became ready).
func (q *Queue) lock(ctx context.Context) (notify bool, err error) {
	w := q.u64(offLock)
	recovered := false
	if !w.CompareAndSwap(0, q.me) {
		if recovered, err = q.lockSlow(ctx); err != nil {
			return false, err
		}
	}
	// A Put before a Claim orders the producer's memory before the
	// claimant's for the race detector, as a lock does.
	shm.RaceAcquire(q.rsync)
	q.readied, q.wakeAll = 0, false
	if recovered {
		q.rebuild()
		notify = true
	}
	if g := q.u64(offProcGen).Load(); g != q.seenGen.Load() {
		// Someone joined: watch it, so that its claims come back the
		// moment it exits, whatever this handle is doing then.
		q.seenGen.Store(g)
		q.watch(q.participants())
	}
	if q.u64(offNextDue).Load() == 0 {
		return notify, nil // nothing delayed: no clock to read
	}
	return q.promote(time.Now().UnixNano()) || notify, nil
}

func (q *Queue) lockSlow(ctx context.Context) (recovered bool, err error) {
	w := q.u64(offLock)
	if q.spinLock(w) && w.CompareAndSwap(0, q.me) {
		return false, nil
	}
	for {
		v := w.Load()
		if v == 0 {
			// A waiter may sleep still: the unlock must look.
			if w.CompareAndSwap(0, q.me|fLockWait) {
				return false, nil
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if v&fLockWait == 0 && !w.CompareAndSwap(v, v|fLockWait) {
			continue
		}
		v |= fLockWait
		timedOut, err := ipc.FutexWait(q.futex(offLock), uint32(v), deadCheck)
		if err != nil {
			return false, err
		}
		if timedOut && w.Load() == v && q.gone2(v) && w.CompareAndSwap(v, q.me|fLockWait) {
			return true, nil
		}
	}
}

// unlock gives the lock back, and wakes claimants when notify is set: one
// per job made ready, or all of them after a change every sleeper must
// see (a new earliest delay, a rebuild, a new participant). A claimant
// woken for a job it does not take either sees it taken or passes the
// wake-up on (see Claim).
func (q *Queue) unlock(notify bool) {
	n, sleepers := -1, false
	if notify {
		q.u32(offSeq).Add(1)
		if q.readied > 0 && !q.wakeAll {
			n = q.readied
		}
		// Read after the change to the futex word (see wake), and before
		// the release, while the line is this process's.
		sleepers = q.u32(offSleepers).Load() != 0
	}
	shm.RaceRelease(q.rsync)
	if q.u64(offLock).Swap(0)&fLockWait != 0 {
		_, _ = ipc.FutexWake(q.futex(offLock), 1)
	}
	if sleepers {
		q.wake(n)
	}
}

// gone2 reports whether the process of a lock or participant word o will
// never run again: it is gone, not the recorded process (pid reuse), or a
// zombie. A process with SIGKILL pending is not yet dead here: another of
// its threads may still write for an instant. Errors count as alive.
func (q *Queue) gone2(o uint64) bool {
	pid, tag := int(uint32(o)&pidMask), uint32(o>>32)
	if pid == int(uint32(q.me)&pidMask) {
		return tag != uint32(q.me>>32)
	}
	p, state, ok, err := ipc.LookupProc(pid)
	if err != nil {
		return false
	}
	return !ok || p.Tag() != tag || state == 'Z' || state == 'X'
}

// rebuild derives the ring, the free stack and the earliest delay from
// the slot words, after a process died holding the lock. Staged slots of
// a batch that was not published are freed.
func (q *Queue) rebuild() {
	fresh := min(q.u64(offFresh).Load(), Capacity)
	q.u64(offFresh).Store(fresh)
	committed := q.u64(offCommitted).Load()
	var ready, published, free []uint32
	var due int64
	swept := uint64(0)
	// Acks go on meanwhile: the count loses only the ones freed here.
	defer func() { q.u64(offAcked).Add(-swept) }()
	for i := uint32(0); i < uint32(fresh); i++ {
		st := q.sw(i, sState)
		s := st.Load()
		switch s & 0xff {
		case stStaged:
			if q.sw(i, sToken).Load() > committed {
				st.Store(stFree)
				free = append(free, i)
				continue
			}
			// Published: it is ready (or delayed) like its batch.
			if d := int64(q.sw(i, sDue).Load()); d > time.Now().UnixNano() {
				st.Store(stDelayed | s&^0xff)
				due = earliest(due, d)
				continue
			}
			published = append(published, i)
		case stReady:
			ready = append(ready, i)
		case stDelayed:
			due = earliest(due, int64(q.sw(i, sDue).Load()))
		case stFree, stAcked:
			if s&0xff == stAcked {
				st.Store(stFree)
				swept++
			}
			free = append(free, i)
		case stClaimed, stDead:
		default:
			st.Store(stFree) // damage: not a state this package writes
			free = append(free, i)
		}
	}
	// The rest of a batch published by a producer that died goes
	// behind the ready jobs, in the order of the batch.
	slices.SortFunc(published, func(a, b uint32) int { return cmpU64(q.sw(a, sID).Load(), q.sw(b, sID).Load()) })
	for _, i := range published {
		q.sw(i, sOrder).Store(q.back())
		q.setKind(i, stReady)
	}
	ready = append(ready, published...)
	slices.SortFunc(ready, func(a, b uint32) int { return cmpU64(q.sw(a, sOrder).Load(), q.sw(b, sOrder).Load()) })
	head := q.u64(offHead).Load()
	for k, i := range ready {
		q.ring(head + uint64(k)).Store(i)
	}
	q.u64(offTail).Store(head + uint64(len(ready)))
	// Low slots are popped first, so that the pages in use stay few.
	slices.Reverse(free)
	for k, i := range free {
		q.free(uint64(k)).Store(i)
	}
	q.u64(offFreeTop).Store(uint64(len(free)))
	q.u64(offNextDue).Store(uint64(due))
	q.wakeAll = true
}

func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// back and front give the order of a job put at the back or the front of
// the ready ring: a count up from the middle of the range, or down from it.
func (q *Queue) back() uint64  { return 1<<62 + q.bump(offBack) }
func (q *Queue) front() uint64 { return 1<<62 - q.bump(offFront) }

// bump adds one to the counter at off and returns it; under the lock.
func (q *Queue) bump(off int) uint64 {
	n := q.u64(off).Load() + 1
	q.put64(off, n)
	return n
}

// pushBack and pushFront make slot i ready, keeping attempt bits.
func (q *Queue) pushBack(i uint32) {
	q.pushBackAs(i, q.sw(i, sState).Load()&^0xff|stReady)
}

// pushBackAs makes slot i ready with the state word s, stored last.
func (q *Queue) pushBackAs(i uint32, s uint64) {
	q.put64(slotOff(i)+sOrder, q.back())
	t := q.u64(offTail).Load()
	q.put32(ringOff(t), i)
	q.put64(offTail, t+1)
	q.sw(i, sState).Store(s)
	q.readied++
}

func (q *Queue) pushFront(i uint32) {
	q.put64(slotOff(i)+sOrder, q.front())
	h := q.u64(offHead).Load() - 1
	q.put32(ringOff(h), i)
	q.put64(offHead, h)
	q.setKind(i, stReady)
	q.readied++
}

// setKind stores slot i's state with kind k and its attempt bits kept.
func (q *Queue) setKind(i uint32, k uint64) {
	st := q.sw(i, sState)
	st.Store(st.Load()&^0xff | k)
}

// promote makes the delayed jobs due at now ready, oldest due first, and
// reports whether there were any.
func (q *Queue) promote(now int64) bool {
	nd := int64(q.u64(offNextDue).Load())
	if nd == 0 || nd > now {
		return false
	}
	var due []uint32
	var next int64
	fresh := uint32(min(q.u64(offFresh).Load(), Capacity))
	for i := uint32(0); i < fresh; i++ {
		if q.sw(i, sState).Load()&0xff != stDelayed {
			continue
		}
		if d := int64(q.sw(i, sDue).Load()); d <= now {
			due = append(due, i)
		} else {
			next = earliest(next, d)
		}
	}
	slices.SortFunc(due, func(a, b uint32) int {
		if c := cmpU64(q.sw(a, sDue).Load(), q.sw(b, sDue).Load()); c != 0 {
			return c
		}
		return cmpU64(q.sw(a, sID).Load(), q.sw(b, sID).Load())
	})
	for _, i := range due {
		q.pushBack(i)
	}
	q.u64(offNextDue).Store(uint64(next))
	return len(due) > 0
}

// delay makes slot i a delayed job due at d.
func (q *Queue) delay(i uint32, d int64) {
	q.sw(i, sDue).Store(uint64(d))
	q.setKind(i, stDelayed)
	q.wakeAll = true // every sleeper may have to wake sooner
	q.u64(offNextDue).Store(uint64(earliest(int64(q.u64(offNextDue).Load()), d)))
}

// freeSlot frees slot i.
func (q *Queue) freeSlot(i uint32) {
	q.sw(i, sState).Store(stFree)
	n := q.u64(offFreeTop).Load()
	q.put32(offFree+4*int(n), i)
	q.put64(offFreeTop, n+1)
}

// room returns how many slots are free. When the free stack holds fewer
// than need, it first sweeps acked slots into it if that is needed or
// cheap: a sweep reads every slot used so far, so it waits until at least
// one in sweepRatio of them is acked, and fresh slots serve meanwhile. A
// queue that is seldom deep thus reuses its few slots (a fresh page costs
// a fault at its first write), and a deep one sweeps in bulk.
func (q *Queue) room(need int) int {
	free := int(q.u64(offFreeTop).Load())
	if free >= need {
		return free + Capacity - int(min(q.u64(offFresh).Load(), Capacity))
	}
	// The count of acked slots, which claimants raise, is read only here.
	used, acked := int(min(q.u64(offFresh).Load(), Capacity)), int(q.u64(offAcked).Load())
	if acked != 0 && (acked*sweepRatio >= used || free+Capacity-used < need) {
		q.sweep()
		free = int(q.u64(offFreeTop).Load())
	}
	return free + Capacity - used
}

// sweepRatio: see room.
const sweepRatio = 8

// sweep moves the acked slots to the free stack, the lowest on top; under
// the lock. A holder killed in the middle leaves slots acked or free, both
// free to a rebuild, and a count above what is left.
func (q *Queue) sweep() {
	k := 0
	for i := uint32(min(q.u64(offFresh).Load(), Capacity)); i > 0; i-- {
		if q.sw(i-1, sState).Load()&0xff == stAcked {
			q.freeSlot(i - 1)
			k++
		}
	}
	q.u64(offAcked).Add(-uint64(k))
}

// take returns a free slot; room must have found one.
func (q *Queue) take() uint32 {
	if n := q.u64(offFreeTop).Load(); n > 0 {
		q.put64(offFreeTop, n-1)
		return q.free(n - 1).Load()
	}
	f := q.u64(offFresh).Load()
	q.put64(offFresh, f+1)
	return uint32(f)
}
