package word

import "sync/atomic"

// Readers is one handle's count of anonymous read holds of a read-write
// lock in shared memory (the shared-memory RWMutex lays it out and serves
// every other case). baton's core takes and gives back such holds through
// it with one compare-and-swap on the handle's own count and one load of
// the lock's state word, and no call into the driver.
//
// The count word holds a generation in its high half and the number of
// holds in its low half. The driver starts a new generation whenever the
// count's slot changes hands (a claim, a Close, a dead process's slot
// reclaimed), so a stale handle's compare-and-swap can never move another
// handle's count. A reader adds to its count and then loads the state
// word, and a writer takes the state word and then reads the counts, with
// sequentially consistent atomics: of a reader and a writer that race, at
// least one sees the other.
type Readers struct {
	count *Uint64
	state *Uint64
	gone  *atomic.Bool
	sync  *atomic.Uint64
	wake  func()
	block uint64 // state bits that turn readers away
	drain uint64 // state bit: a writer waits for readers to leave
	gen   uint64 // this handle's generation, in the high half
}

const low = 0xffffffff

// maxReaders bounds the holds of one count, far below the low half's
// range, so that an add never carries into the generation.
const maxReaders = 1 << 30

// NewReaders describes a count word of generation gen (its high half).
// block is the set of state bits that make a reader wait (a writer holds,
// drains or waits) and drain the one that makes a leaving reader call
// wake; gone is set by the driver when the memory is no longer shared;
// sync is the race detector's word of the lock (see New).
func NewReaders(count, state *Uint64, gone *atomic.Bool, sync *atomic.Uint64, wake func(), block, drain, gen uint64) *Readers {
	return &Readers{count: count, state: state, gone: gone, sync: sync, wake: wake, block: block, drain: drain, gen: gen &^ low}
}

// TryRLock takes one read hold with one compare-and-swap when no writer
// holds, drains or waits, and reports whether it did. When it did not,
// the caller calls RLock(added), which finishes the attempt. (The two
// halves let TryRLock be inlined.)
func (r *Readers) TryRLock() (held, added bool) {
	// v-gen < maxReaders: of this generation, and not full.
	v := r.count.Load()
	added = v-r.gen < maxReaders && r.count.CompareAndSwap(v, v+1)
	if added && r.state.Load()&r.block == 0 {
		raceAcquire(r.sync)
		return true, true
	}
	return false, added
}

// RLock finishes a TryRLock that did not hold, and reports whether the
// hold is taken: when added, the hold was counted but a writer turns
// readers away, and it is given back; otherwise the count changed under
// TryRLock (another goroutine of the handle), or is not this handle's, or
// is full, and it tries again.
func (r *Readers) RLock(added bool) bool {
	if added {
		r.give()
		return false
	}
	for {
		v := r.count.Load()
		if v-r.gen >= maxReaders {
			return false
		}
		if r.count.CompareAndSwap(v, v+1) {
			break
		}
	}
	if r.state.Load()&r.block != 0 {
		r.give()
		return false
	}
	raceAcquire(r.sync)
	return true
}

// TryRUnlock gives back one read hold counted here with one
// compare-and-swap, and reports whether it is done. When it is not, the
// caller calls RUnlockMore(taken), which finishes.
func (r *Readers) TryRUnlock() (done, taken bool) {
	raceRelease(r.sync)
	// v-gen-1 < maxReaders: of this generation, and not empty.
	v := r.count.Load()
	taken = v-r.gen-1 < maxReaders && !r.gone.Load() && r.count.CompareAndSwap(v, v-1)
	return taken && r.state.Load()&r.drain == 0, taken
}

// RUnlockMore finishes a TryRUnlock that is not done, and reports whether
// a hold was given back: when taken, it was, and a writer that drains
// readers is woken; otherwise the count changed under TryRUnlock and it
// tries again, or there is nothing to give back here (none counted, or
// the memory is no longer shared: the caller's regular path decides).
func (r *Readers) RUnlockMore(taken bool) bool {
	if taken {
		r.wake()
		return true
	}
	return !r.gone.Load() && r.give()
}

// Release is the result of RUnlock.
type Release uint8

const (
	Released Release = iota // one hold given back
	None                    // no hold counted
	Lost                    // the count is no longer this handle's (reclaimed or closed)
)

// RUnlock gives back one read hold counted here, also when the memory is
// no longer shared (Gone then reports it).
func (r *Readers) RUnlock() Release {
	raceRelease(r.sync)
	if r.give() {
		return Released
	}
	if r.count.Load()&^low != r.gen {
		return Lost
	}
	return None
}

// Gone reports whether the lock's memory is no longer shared.
func (r *Readers) Gone() bool { return r.gone.Load() }

// Count returns the read holds counted here.
func (r *Readers) Count() int64 {
	v := r.count.Load()
	if v&^low != r.gen {
		return 0
	}
	return int64(v & low)
}

// give takes one off the count, if it is this handle's and above zero,
// and wakes a writer waiting for readers to leave.
func (r *Readers) give() bool {
	for {
		v := r.count.Load()
		if v&^low != r.gen || v&low == 0 {
			return false
		}
		if r.count.CompareAndSwap(v, v-1) {
			break
		}
	}
	if r.state.Load()&r.drain != 0 {
		r.wake()
	}
	return true
}
