package etcdlock

import (
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A range read with a limit still walks its whole range on the server,
// which counts the keys in it: a claim reading the ready jobs of a queue
// with a large backlog would pay for every ready job at every claim. So
// the handles of a queue in a Backend keep, per record form, a horizon:
// the ready time below which the next read looks, chosen from what the
// last read counted so that the window holds the jobs of many claims and
// few more. A window starts at the oldest record, so it holds every job
// ready before its end, and a claim still takes the oldest; a claim that
// finds none in the window it can take reads the whole range again.

// Bounds of the keys a window should hold: fewer, and it grows; more,
// and it shrinks (both scaled up for claims of many jobs). A range of no
// more than windowMost keys is read whole.
const (
	windowLeast = 64
	windowMost  = 1024
)

// windowedReads counts the claim reads that looked at a window rather
// than at every ready job (for the tests).
var windowedReads atomic.Int64

// Until a compaction, etcd keeps every deleted key in its index and a
// range read walks them: a read from the start of a form's records would
// walk the record of every job done since, and claims would slow down as
// jobs are done. So a window also starts at a floor: the ready time of the
// oldest record the last read found (claimed or not: a claimed record
// stays in its place), less floorSlack, which a Put in flight is unlikely
// to outlast. Records never move, and a new one is ready at its
// producer's clock, so one below the floor is a job of a producer whose
// clock is behind (or whose Put took longer to land). A claimant that
// waits watches the queue from the last read that started at the first
// record, so it sees every such record put since and lowers the floor to
// it; claimants that do not wait find it at the next such read, which
// comes every fullEvery, or fifty times as long as the last one took.
var (
	floorSlack = int64(20 * time.Millisecond)
	fullEvery  = time.Second
)

// windows are the horizons and floors of a queue's two record forms (r/,
// j/).
type windows struct {
	mu      sync.Mutex
	horizon [2]int64  // guarded by mu; Unix ns, 0: read every ready job
	floor   [2]int64  // guarded by mu; Unix ns, 0: read from the first record
	moves   [2]uint64 // guarded by mu; counts the changes of floor
	// The last read that started at the first record: when, its
	// revision, and how long it took.
	full     time.Time     // guarded by mu
	fullRev  int64         // guarded by mu
	fullCost time.Duration // guarded by mu
}

// start is where a read of both forms starts: the floors (0: at the first
// record) and their counts of changes then.
type start struct {
	at    [2]int64
	moves [2]uint64
}

// ends returns where the next read of each form ends: its horizon, or
// upto (just past now) when it has none or upto comes first.
func (w *windows) ends(upto int64) [2]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := [2]int64{upto, upto}
	for i, h := range w.horizon {
		if h > 0 && h < upto {
			e[i] = h
		}
	}
	return e
}

// starts returns where the next read of each form starts: the floors, or
// the first records when the last read from there is due again.
func (w *windows) starts() start {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := start{at: w.floor, moves: w.moves}
	if time.Since(w.full) >= max(fullEvery, 50*w.fullCost) {
		st.at = [2]int64{}
	}
	return st
}

// fullRevision returns the revision of the last read that started at the
// first record (0: none): a record below a floor was put after it.
func (w *windows) fullRevision() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fullRev
}

// forceFull has the next read start at the first record (a watch from
// fullRevision could not be made: compacted).
func (w *windows) forceFull() {
	w.mu.Lock()
	w.full = time.Time{}
	w.mu.Unlock()
}

// lower moves form i's floor down to at when it is above it, and reports
// whether it did: a record ready at at was written (seen by a watch).
func (w *windows) lower(i int, at int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.floor[i] <= at {
		return false
	}
	w.floor[i] = max(0, at-1)
	w.moves[i]++
	return true
}

// setFloor sets form i's floor to at, read from st: raised only when
// the floor did not move since st, so that a floor lowered meanwhile, for
// a record this read came too early to see, stays.
func (w *windows) setFloor(i int, st start, at int64) {
	at = max(0, at)
	if w.moves[i] != st.moves[i] {
		at = min(at, w.floor[i])
	}
	if at != w.floor[i] {
		w.floor[i] = at
		w.moves[i]++
	}
}

// observe sets the floors and horizons from a read of each form's records
// from st up to ends[i] (a whole read when that is upto), limited to limit
// records: the server counted rs[i].Count in the range, and readyAt gives
// a record's ready time; the read was at revision rev and took took.
func (w *windows) observe(st start, ends [2]int64, upto int64, rs [2]*etcdserverpb.RangeResponse, limit int, readyAt func([]byte) int64, rev int64, took time.Duration) {
	least, most := max(windowLeast, 2*limit), max(windowMost, 32*limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	if st.at == ([2]int64{}) {
		w.full, w.fullRev, w.fullCost = time.Now(), rev, took
	}
	for i, r := range rs {
		n, kvs, end := int(r.Count), r.Kvs, ends[i]
		if len(kvs) == 0 {
			// None up to the end: a later record is ready at its
			// producer's clock, from about now on.
			w.setFloor(i, st, end-floorSlack)
			w.horizon[i] = 0
			continue
		}
		first, last := readyAt(kvs[0].Key), readyAt(kvs[len(kvs)-1].Key)
		w.setFloor(i, st, first-floorSlack)
		// The range's ready times are taken as evenly spread: the part
		// of the span from first to end that holds about k keys.
		part := func(k int) int64 {
			h := first + int64(float64(end-first)*float64(k)/float64(max(n, 1)))
			return max(h, last+1, first+int64(time.Millisecond))
		}
		switch {
		case end >= upto && n <= most:
			w.horizon[i] = 0 // cheap enough to read whole
		case end >= upto || n > most:
			w.horizon[i] = part(most / 4)
		case n < least:
			w.horizon[i] = first + 2*(end-first) + 1 // too few: grow
		}
	}
}
