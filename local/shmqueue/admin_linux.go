//go:build linux

package shmqueue

import (
	"context"
	"slices"
	"time"

	"github.com/batonlock/baton/driver"
)

// Stats counts the jobs by state, once the claims of dead participants
// are given back (driver.Queue).
func (q *Queue) Stats(ctx context.Context) (driver.QueueStats, error) {
	notify, err := q.lock(ctx)
	if err != nil {
		return driver.QueueStats{}, err
	}
	notify = q.reapDead() || notify
	var s driver.QueueStats
	fresh := uint32(min(q.u64(offFresh).Load(), Capacity))
	for i := uint32(0); i < fresh; i++ {
		switch q.sw(i, sState).Load() & 0xff {
		case stReady:
			s.Ready++
		case stDelayed:
			s.Delayed++
		case stClaimed:
			s.InFlight++
		case stDead:
			s.Dead++
		}
	}
	q.unlock(notify)
	return s, nil
}

// deadSlots returns the slots of dead letters, oldest first; under the
// lock.
func (q *Queue) deadSlots() []uint32 {
	var out []uint32
	fresh := uint32(min(q.u64(offFresh).Load(), Capacity))
	for i := uint32(0); i < fresh; i++ {
		if q.sw(i, sState).Load()&0xff == stDead {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b uint32) int {
		if c := cmpU64(q.sw(a, sDue).Load(), q.sw(b, sDue).Load()); c != 0 {
			return c
		}
		return cmpU64(q.sw(a, sID).Load(), q.sw(b, sID).Load())
	})
	return out
}

// Dead returns up to limit dead letters, oldest first (driver.Queue).
func (q *Queue) Dead(ctx context.Context, limit int) ([]driver.DeadJob, error) {
	notify, err := q.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { q.unlock(notify) }()
	var out []driver.DeadJob
	for _, i := range q.deadSlots() {
		if len(out) == limit {
			break
		}
		d := q.data(i)
		p := make([]byte, q.sh(i, sLen).Load())
		copy(p, d)
		rl := int(q.sh(i, sLens).Load() >> 16)
		out = append(out, driver.DeadJob{
			ID: q.sw(i, sID).Load(), Payload: p, Attempts: q.attempt(i),
			Reason: string(d[rsnOff : rsnOff+rl]), At: time.Unix(0, int64(q.sw(i, sDue).Load())),
		})
	}
	return out, nil
}

// Requeue makes the dead letters with the ids ready, attempts from zero
// (driver.Queue).
func (q *Queue) Requeue(ctx context.Context, ids []uint64) (int, error) {
	return q.onDead(ctx, ids, func(i uint32) bool {
		if h := q.sh(i, sKeyH).Load(); h != 0 {
			if _, taken := q.pending(string(q.key(i)), h); taken {
				return false
			}
		}
		q.sw(i, sDue).Store(uint64(time.Now().UnixNano())) // ready since
		q.pushBackAs(i, stReady)                           // attempts from zero, in the same store
		return true
	})
}

// Purge deletes the dead letters with the ids (driver.Queue).
func (q *Queue) Purge(ctx context.Context, ids []uint64) (int, error) {
	return q.onDead(ctx, ids, func(i uint32) bool { q.freeSlot(i); return true })
}

func (q *Queue) onDead(ctx context.Context, ids []uint64, do func(i uint32) bool) (int, error) {
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	notify, err := q.lock(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, i := range q.deadSlots() {
		if want[q.sw(i, sID).Load()] && do(i) {
			n++
		}
	}
	q.unlock(notify || n > 0)
	return n, nil
}
