package etcdlock

import (
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton/driver"
)

// trying marks the job records that claimants of this process are
// claiming or holding. Claimants of one Backend then try different jobs,
// as SKIP LOCKED makes them on the SQL servers, rather than all the
// oldest: only one of them could have it, and the others would read the
// queue again and try the next together. A record stays marked while its
// claim is held, as a claimant whose read came before the claim would see
// it unclaimed. A lone claimant still takes the oldest; claimants of other
// processes are not seen, and a conflict with them is read again as
// before.
var trying = struct {
	mu sync.Mutex
	m  map[markKey]bool
	n  map[queueKey]int // marks by queue, read past by tryClaim
}{m: map[markKey]bool{}, n: map[queueKey]int{}}

type markKey struct {
	b   *backend
	key string
}

type queueKey struct {
	b   *backend
	dir string
}

// claimConflicts counts the claims that found another claimant had come
// between (for the tests).
var claimConflicts atomic.Int64

// marks returns how many records of the queue are marked.
func (d *queueDriver) marks() int {
	trying.mu.Lock()
	defer trying.mu.Unlock()
	return trying.n[queueKey{d.b, d.dir}]
}

// reserve orders the unclaimed ready records read so that those no other
// claimant of this process is trying or holding come first (each part in
// its order), and marks the first n of those; it returns how many it
// marked (the first m of the order).
func (d *queueDriver) reserve(rs []record, n int) ([]record, int) {
	trying.mu.Lock()
	defer trying.mu.Unlock()
	free := make([]record, 0, len(rs))
	var busy []record
	for _, r := range rs {
		k := markKey{d.b, string(r.kv.Key)}
		if trying.m[k] {
			busy = append(busy, r)
			continue
		}
		if len(free) < n {
			trying.m[k] = true
			trying.n[queueKey{d.b, d.dir}]++
		}
		free = append(free, r)
	}
	return append(free, busy...), min(n, len(free))
}

// settle keeps the marks of the records claimed, until their claims end
// (see unmark), and drops those of the others marked.
func (d *queueDriver) settle(marked []record, cs []driver.Claim) {
	claimed := map[string]bool{}
	for _, c := range cs {
		if qc, ok := c.Data.(*qclaim); ok {
			claimed[qc.rkey] = true
		}
	}
	for _, r := range marked {
		if !claimed[string(r.kv.Key)] {
			d.unmarkKey(string(r.kv.Key))
		}
	}
}

// unmarkKey drops the mark of a record, if it has one.
func (d *queueDriver) unmarkKey(key string) {
	trying.mu.Lock()
	defer trying.mu.Unlock()
	k := markKey{d.b, key}
	if !trying.m[k] {
		return
	}
	delete(trying.m, k)
	q := queueKey{d.b, d.dir}
	if trying.n[q]--; trying.n[q] <= 0 {
		delete(trying.n, q)
	}
}
