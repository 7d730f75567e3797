//go:build linux

package shmqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// Participants: every process with the queue open has an entry, so that
// a claimant that waits can watch them all and give back the claims of
// one that dies (see the package documentation).

func (q *Queue) proc(k int) *word.Uint64 { return q.u64(offProcs + 8*k) }

// join enters the calling process among the participants, unless it is
// there already. A full table is first rid of dead processes.
func (q *Queue) join() error {
	ctx := context.Background()
	notify, err := q.lock(ctx)
	if err != nil {
		return err
	}
	defer func() { q.unlock(notify) }()
	free := -1
	for k := range MaxProcs {
		switch o := q.proc(k).Load(); {
		case o == q.me:
			return nil
		case o == 0 && free < 0:
			free = k
		}
	}
	if free < 0 {
		notify = q.reapDead() || notify
		for k := range MaxProcs {
			if q.proc(k).Load() == 0 {
				free = k
				break
			}
		}
	}
	if free < 0 {
		return fmt.Errorf("%w: %d processes have the queue open", baton.ErrUnsupported, MaxProcs)
	}
	q.proc(free).Store(q.me)
	// Every handle watches the newcomer, from its next call (or at once,
	// for claimants that wait).
	q.u64(offProcGen).Add(1)
	notify, q.wakeAll = true, true
	return nil
}

// participants returns the other participants; under the lock.
func (q *Queue) participants() []uint64 {
	var out []uint64
	for k := range MaxProcs {
		if o := q.proc(k).Load(); o != 0 && o != q.me {
			out = append(out, o)
		}
	}
	return out
}

// reapDead gives back the claims of every participant found dead, and
// reports whether it reaped any (see reapLocked); under the lock.
func (q *Queue) reapDead() bool {
	any := false
	for k := range MaxProcs {
		if o := q.proc(k).Load(); o != 0 && o != q.me && q.gone2(o) {
			any = q.reapLocked(o) || any
		}
	}
	return any
}

// reapLocked gives back the claims of participant o, which died, and takes
// it off the table; under the lock. Every sleeper is then woken, and it
// reports true: o may have died spinning, and wakers that counted on its
// spin (see wake) woke nobody for their jobs. The spinner's word is
// cleared first, so that no waker counts on that spin after the wake-up
// either (the word names no process; a live spinner it clears costs a
// waker one futex wake).
func (q *Queue) reapLocked(o uint64) bool {
	any := false
	fresh := uint32(min(q.u64(offFresh).Load(), Capacity))
	for i := uint32(0); i < fresh; i++ {
		if q.sw(i, sState).Load()&0xff == stClaimed && q.sw(i, sOwner).Load() == o {
			q.lapse(i, "its claimant process died")
			any = true
		}
	}
	for k := range MaxProcs {
		if q.proc(k).Load() == o {
			q.proc(k).Store(0)
			q.u64(offProcGen).Add(1)
			q.u32(offSpinner).Store(0)
			q.wakeAll, any = true, true
		}
	}
	return any
}

// lapse gives back claimed slot i whose claim ended without the
// claimant's word: to the front of the ready jobs, or to the dead letters
// when the claim was the job's last attempt.
func (q *Queue) lapse(i uint32, reason string) {
	if q.attempt(i) >= int(q.sh(i, sMax).Load()) {
		q.bury(i, reason+" on its last attempt")
		return
	}
	q.sw(i, sDue).Store(uint64(time.Now().UnixNano())) // ready since
	q.pushFront(i)
}

// watch makes sure that every other participant is watched by a goroutine
// of this handle, which gives back the claims of a participant that exits.
func (q *Queue) watch(ps []uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	for _, o := range ps {
		if q.watching[o] {
			continue
		}
		q.watching[o] = true
		q.watchers.Add(1)
		go q.watchOne(o)
	}
}

func (q *Queue) watchOne(o uint64) {
	defer q.watchers.Done()
	ctx := q.watchCtx
	err := ipc.WaitExit(ctx, int(uint32(o)&pidMask), uint32(o>>32))
	if err == nil && !q.gone.Load() {
		// The process may be exiting still: reaping waits, under the
		// lock, for no more than the lock's own takeover does.
		if notify, err := q.lock(ctx); err == nil {
			if q.stillIn(o) && q.gone2(o) {
				notify = q.reapLocked(o) || notify
			}
			q.unlock(notify)
		}
	}
	q.mu.Lock()
	delete(q.watching, o)
	q.mu.Unlock()
}

// stillIn reports whether o is a participant; under the lock.
func (q *Queue) stillIn(o uint64) bool {
	for k := range MaxProcs {
		if q.proc(k).Load() == o {
			return true
		}
	}
	return false
}
