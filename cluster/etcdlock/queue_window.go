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

// windows are the horizons of a queue's two record forms (r/, j/).
type windows struct {
	mu      sync.Mutex
	horizon [2]int64 // guarded by mu; Unix ns, 0: read every ready job
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

// observe sets the horizons from a read of each form's records up to
// ends[i] (a whole read when that is upto), limited to limit records: the
// server counted rs[i].Count in the range, and readyAt gives a record's
// ready time.
func (w *windows) observe(ends [2]int64, upto int64, rs [2]*etcdserverpb.RangeResponse, limit int, readyAt func([]byte) int64) {
	least, most := max(windowLeast, 2*limit), max(windowMost, 32*limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, r := range rs {
		n, kvs, end := int(r.Count), r.Kvs, ends[i]
		if len(kvs) == 0 {
			w.horizon[i] = 0
			continue
		}
		first, last := readyAt(kvs[0].Key), readyAt(kvs[len(kvs)-1].Key)
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
