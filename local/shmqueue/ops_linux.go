//go:build linux

package shmqueue

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

func (q *Queue) attempt(i uint32) int { return int(q.sw(i, sState).Load() >> 8 & 0xffffff) }

// bury makes claimed slot i a dead letter with reason.
func (q *Queue) bury(i uint32, reason string) {
	if len(reason) > baton.MaxReasonLen {
		reason = reason[:baton.MaxReasonLen]
	}
	copy(q.data(i)[rsnOff:], reason)
	l := q.sh(i, sLens)
	l.Store(l.Load()&0xffff | uint32(len(reason))<<16)
	q.sw(i, sDue).Store(uint64(time.Now().UnixNano()))
	q.setKind(i, stDead)
}

func keyHash(key string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32() | 1 // 0 is no key
}

func (q *Queue) key(i uint32) []byte {
	return q.data(i)[keyOff : keyOff+int(q.sh(i, sLens).Load()&0xffff)]
}

// pending returns the id of the pending job (ready, delayed or claimed)
// with key; under the lock.
func (q *Queue) pending(key string, h uint32) (uint64, bool) {
	fresh := uint32(min(q.u64(offFresh).Load(), Capacity))
	for i := uint32(0); i < fresh; i++ {
		switch q.sw(i, sState).Load() & 0xff {
		case stReady, stDelayed, stClaimed:
			if q.sh(i, sKeyH).Load() == h && bytes.Equal(q.key(i), []byte(key)) {
				return q.sw(i, sID).Load(), true
			}
		}
	}
	return 0, false
}

// Put adds the jobs, all published by one store (driver.Queue).
func (q *Queue) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	for _, j := range jobs {
		if len(j.Payload) > MaxPayload || len(j.Key) > baton.MaxJobKeyLen || j.MaxAttempts < 1 || j.MaxAttempts > 0xffffff {
			return nil, fmt.Errorf("%w: a job the core should have refused", baton.ErrInvalidArgument)
		}
	}
	// The clock is read before the lock, which is held for as little as
	// can be: a job put now is ready since now, or delayed past it.
	now := wallNow()
	notify, err := q.lock(ctx)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 1 && jobs[0].Key == "" {
		return q.putOne(jobs[0], now, notify)
	}
	ids := make([]uint64, len(jobs))
	var fresh []int             // indexes of jobs that need a slot
	seen := map[string]uint64{} // keys of this batch → index+1 in jobs
	for k, j := range jobs {
		if j.Key == "" {
			fresh = append(fresh, k)
			continue
		}
		if n, ok := seen[j.Key]; ok {
			ids[k] = uint64(n) // resolved below, once the first one has its id
			continue
		}
		if id, ok := q.pending(j.Key, keyHash(j.Key)); ok {
			ids[k] = id
			seen[j.Key] = 0
			continue
		}
		seen[j.Key] = uint64(k + 1)
		fresh = append(fresh, k)
	}
	if room := q.room(len(fresh)); len(fresh) > room {
		q.unlock(notify)
		return nil, fmt.Errorf("%w: %d jobs do not fit (capacity %d, %d free)", baton.ErrFull, len(fresh), Capacity, room)
	}
	stamp := q.u64(offCommitted).Load() + 1
	slots := make([]uint32, len(fresh))
	for n, k := range fresh {
		i := q.take()
		slots[n] = i
		ids[k] = q.u64(offNextID).Add(1)
		q.write(i, jobs[k], ids[k], stamp, now) // not sOrder: pushBack writes that before the state
		q.sw(i, sState).Store(stStaged)
	}
	// The publication of the whole batch.
	q.u64(offCommitted).Store(stamp)
	for n, i := range slots {
		if at := jobs[fresh[n]].At; !at.IsZero() && at.UnixNano() > now {
			q.delay(i, at.UnixNano())
		} else {
			q.pushBack(i)
		}
	}
	// Later jobs of the batch with a key seen earlier in it take the id
	// of the first.
	for k, j := range jobs {
		if j.Key != "" {
			if first := seen[j.Key]; first != 0 && first != uint64(k+1) {
				ids[k] = ids[first-1]
			}
		}
	}
	q.unlock(notify || len(slots) > 0)
	return ids, nil
}

// write writes job j into slot i, but for the state word and sOrder:
// with id, and stamp in the token word, put at now.
func (q *Queue) write(i uint32, j driver.PutJob, id, stamp uint64, now int64) {
	d := q.data(i)
	copy(d, j.Payload)
	copy(d[keyOff:], j.Key)
	due := now // ready since now, unless delayed
	if !j.At.IsZero() {
		due = j.At.UnixNano()
	}
	h := uint32(0)
	if j.Key != "" {
		h = keyHash(j.Key)
	}
	// Plain stores, one line: under the lock, and published (or not) by
	// the state word's store after them.
	sl := (*slotHeader)(unsafe.Add(q.base, slotOff(i)))
	sl.id, sl.token, sl.due = id, stamp, uint64(due)
	sl.max, sl.len, sl.keyH, sl.lens = uint32(j.MaxAttempts), uint32(len(j.Payload)), h, uint32(len(j.Key))
}

// slotHeader is a slot header's layout (see the s* offsets).
type slotHeader struct {
	state, id, order, due, owner, token uint64
	max, len, keyH, lens                uint32
}

// The layout above matches the offsets, or this does not compile.
var (
	_ [unsafe.Offsetof(slotHeader{}.token) - sToken]struct{}
	_ [sToken - unsafe.Offsetof(slotHeader{}.token)]struct{}
	_ [unsafe.Offsetof(slotHeader{}.lens) - sLens]struct{}
	_ [sLens - unsafe.Offsetof(slotHeader{}.lens)]struct{}
	_ [unsafe.Sizeof(slotHeader{}) - slotSize]struct{}
	_ [slotSize - unsafe.Sizeof(slotHeader{})]struct{}
)

// putOne puts one job without a key, under the lock taken by Put: one
// slot, published by the store of its state word (pushBack, delay), so no
// stamp of a batch.
func (q *Queue) putOne(j driver.PutJob, now int64, notify bool) ([]uint64, error) {
	if room := q.room(1); room < 1 {
		q.unlock(notify)
		return nil, fmt.Errorf("%w: 1 job does not fit (capacity %d, 0 free)", baton.ErrFull, Capacity)
	}
	i := q.take()
	id := q.bump(offNextID)
	q.write(i, j, id, q.u64(offCommitted).Load(), now)
	// A slot from take is free: its state word has no attempts.
	if at := j.At; !at.IsZero() && at.UnixNano() > now {
		q.delay(i, at.UnixNano())
	} else {
		q.pushBackAs(i, stReady)
	}
	q.unlock(true)
	return []uint64{id}, nil
}

// Claim takes up to n ready jobs, waiting for one if wait is set
// (driver.Queue).
func (q *Queue) Claim(ctx context.Context, n int, wait bool) ([]driver.Claim, error) {
	armed := false
	buf := make([]driver.Claim, 0, min(n, 64)) // made before the lock, not under it
	for {
		now := wallNow() // before the lock: see Put
		notify, err := q.lock(ctx)
		if err != nil {
			return nil, err
		}
		if cs := q.claimLocked(n, now, buf); len(cs) > 0 {
			more := q.u64(offHead).Load() != q.u64(offTail).Load() && q.u32(offSleepers).Load() != 0
			q.unlock(notify)
			if more {
				// Jobs are left that a waker may have counted on this
				// claimant (or the spinner it was) for: one sleeper
				// wakes for them, unless one is on its way.
				q.wake(1)
			}
			return q.payloads(cs), nil
		}
		if !wait {
			if q.reapDead() {
				cs := q.claimLocked(n, now, buf)
				q.unlock(true)
				if len(cs) > 0 {
					return q.payloads(cs), nil
				}
			} else {
				q.unlock(notify)
			}
			return nil, baton.ErrEmpty
		}
		seq := q.u32(offSeq).Load()
		timeout := time.Duration(-1)
		if nd := int64(q.u64(offNextDue).Load()); nd != 0 {
			timeout = max(time.Duration(nd-time.Now().UnixNano()), time.Microsecond)
		}
		ps := q.participants()
		q.unlock(notify)
		q.watch(ps)
		if q.spinEmpty(seq) {
			continue // a change came: look again
		}
		if !armed && ctx.Done() != nil {
			// Before the first sleep, not before the first look: a job
			// ready at once costs no registration. Cancellation moves
			// the futex word, so that a claimant between its last look
			// and its sleep does not sleep, and wakes the sleepers; the
			// others look and sleep again.
			armed = true
			// It may run after Claim returned: under q.mu and only
			// while the handle is open, whose Close unmaps the words.
			stop := context.AfterFunc(ctx, func() {
				q.mu.Lock()
				defer q.mu.Unlock()
				if q.closed {
					return
				}
				q.u32(offSeq).Add(1)
				q.wakeSleepers(-1)
			})
			defer stop()
		}
		if err := ctx.Err(); err == nil {
			if err := q.sleep(seq, timeout); err != nil {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			// The wake-up that ended this sleep may have been meant
			// for a job: pass it on.
			q.wake(1)
			return nil, err
		}
	}
}

// claimLocked claims up to n jobs from the head of the ring, at the time
// now, appending them to cs without their payloads (see payloads).
func (q *Queue) claimLocked(n int, now int64, cs []driver.Claim) []driver.Claim {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	for len(cs) < n {
		h, t := q.u64(offHead).Load(), q.u64(offTail).Load()
		if h == t {
			break
		}
		i := q.ring(h).Load()
		q.put64(offHead, h+1)
		if i >= Capacity || q.sw(i, sState).Load()&0xff != stReady {
			continue // not a ready job: the ring is ahead of a change
		}
		tok := q.u64(offToken).Add(1)
		att := q.attempt(i) + 1
		sl := (*slotHeader)(unsafe.Add(q.base, slotOff(i)))
		sl.owner, sl.token, sl.due = q.me, tok, uint64(now)
		q.sw(i, sState).Store(uint64(att)<<8 | stClaimed)
		q.claims[i] = tok
		cs = append(cs, driver.Claim{
			ID: q.sw(i, sID).Load(), Attempt: att, MaxAttempts: int(q.sh(i, sMax).Load()),
			Token: tok, Loss: q.loss, Data: slotData()[i],
		})
	}
	q.held()
	return cs
}

// payloads copies the payloads of claims cs out of their slots, after the
// lock: a claimed slot changes only by its claimant's hand, and this one's
// has not returned them yet. (The copies are the lock's time no more.)
func (q *Queue) payloads(cs []driver.Claim) []driver.Claim {
	for k := range cs {
		i := cs[k].Data.(uint32)
		p := make([]byte, q.sh(i, sLen).Load())
		copy(p, q.data(i))
		cs[k].Payload = p
	}
	return cs
}

// slotData holds the slot numbers as claims' Data, made once: a number
// above 255 put in an interface is an allocation per claim.
var slotData = sync.OnceValue(func() *[Capacity]any {
	var d [Capacity]any
	for i := range d {
		d[i] = uint32(i)
	}
	return &d
})

// mine returns the slot of claim c if it is still this handle's, and
// takes it off the handle's claims: under the lock, or for Ack, whose
// compare-and-swap settles a race with a change under the lock.
func (q *Queue) mine(c driver.Claim) (uint32, error) {
	i, ok := c.Data.(uint32)
	if !ok || i >= Capacity {
		return 0, driver.ErrForeignGrant
	}
	q.mu.Lock()
	tok, held := q.claims[i]
	if held && tok == c.Token {
		delete(q.claims, i)
	}
	q.mu.Unlock()
	if !held || tok != c.Token || q.sw(i, sState).Load()&0xff != stClaimed ||
		q.sw(i, sOwner).Load() != q.me || q.sw(i, sToken).Load() != c.Token {
		return 0, fmt.Errorf("job %d, token %d: %w", c.ID, c.Token, baton.ErrLost)
	}
	return i, nil
}

// Ack deletes the job of claim c (driver.Queue), without the queue's
// lock: a claimed slot of a live claimant changes only by its claimant's
// hand, so one compare-and-swap of its state word from claimed to acked
// is the whole change, and a claimant killed around it has either acked
// or not. The next Put that needs the slot sweeps it into the free stack.
// The count of acked slots is raised first, so that it is never below the
// number a sweep would find.
func (q *Queue) Ack(ctx context.Context, c driver.Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	i, err := q.mine(c)
	if err != nil {
		return err
	}
	st := q.sw(i, sState)
	v := st.Load()
	q.u64(offAcked).Add(1)
	if v&0xff != stClaimed || !st.CompareAndSwap(v, stAcked) {
		q.u64(offAcked).Add(^uint64(0))
		return fmt.Errorf("job %d, token %d: %w", c.ID, c.Token, baton.ErrLost)
	}
	return nil
}

// Retry gives back the job of claim c, due at at, or buries it with
// reason after its last attempt (driver.Queue).
func (q *Queue) Retry(ctx context.Context, c driver.Claim, at time.Time, reason string) error {
	notify, err := q.lock(ctx)
	if err != nil {
		return err
	}
	defer func() { q.unlock(notify) }()
	i, err := q.mine(c)
	if err != nil {
		return err
	}
	switch {
	case q.attempt(i) >= int(q.sh(i, sMax).Load()):
		q.bury(i, reason)
	case !at.IsZero() && at.UnixNano() > time.Now().UnixNano():
		q.delay(i, at.UnixNano())
		notify = true
	default:
		q.sw(i, sDue).Store(uint64(time.Now().UnixNano())) // ready since
		q.pushBack(i)
		notify = true
	}
	return nil
}

// giveBack gives back the claims of a closing handle, to the front of the
// ready jobs.
func (q *Queue) giveBack(claims map[uint32]uint64) error {
	notify, err := q.lock(context.Background())
	if err != nil {
		return err
	}
	for i, tok := range claims {
		if q.sw(i, sState).Load()&0xff == stClaimed && q.sw(i, sOwner).Load() == q.me && q.sw(i, sToken).Load() == tok {
			q.lapse(i, "given back by a closed handle")
			notify = true
		}
	}
	q.unlock(notify)
	return nil
}
