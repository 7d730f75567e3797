package etcdlock

import (
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"

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
func (d *queueDriver) reserve(kvs []*mvccpb.KeyValue, n int) ([]*mvccpb.KeyValue, int) {
	trying.mu.Lock()
	defer trying.mu.Unlock()
	free := make([]*mvccpb.KeyValue, 0, len(kvs))
	var busy []*mvccpb.KeyValue
	for _, kv := range kvs {
		k := markKey{d.b, string(kv.Key)}
		if trying.m[k] {
			busy = append(busy, kv)
			continue
		}
		if len(free) < n {
			trying.m[k] = true
			trying.n[queueKey{d.b, d.dir}]++
		}
		free = append(free, kv)
	}
	return append(free, busy...), min(n, len(free))
}

// settle keeps the marks of the records claimed, until their claims end
// (see unmark), and drops those of the others marked.
func (d *queueDriver) settle(marked []*mvccpb.KeyValue, cs []driver.Claim) {
	claimed := map[string]bool{}
	for _, c := range cs {
		if qc, ok := c.Data.(*qclaim); ok {
			claimed[qc.rkey] = true
		}
	}
	for _, kv := range marked {
		if !claimed[string(kv.Key)] {
			d.unmarkKey(string(kv.Key))
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
