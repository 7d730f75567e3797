package zklock

import (
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton/driver"
)

// trying counts, by record path (behind its Backend's id), the claimants
// of this process claiming or holding that record. Claimants of one
// Backend then try different jobs, as SKIP LOCKED makes them on the SQL
// servers, rather than all the oldest: only one of them could have it,
// and the others would read the queue again and try the next together. A
// record stays marked while its claim is held, as a claimant whose read
// came before the claim would see it unclaimed. A lone claimant still
// takes the oldest; claimants of other processes are not seen, and a
// conflict with them is read again as before.
//
// gone keeps the last goneKept records this process saw deleted (acked,
// retried, buried, or found missing), oldest first in ring: a claimant's
// read names jobs done since, and under a steady flow the jobs done while
// it walked such a list one read at a time would outrun it.
var trying = struct {
	mu   sync.Mutex
	m    map[string]int
	gone map[string]bool
	ring []string
	next int // the oldest entry of ring once it is full
}{m: map[string]int{}, gone: map[string]bool{}}

const goneKept = 4096

// claimConflicts counts the claims that found another claimant had come
// between, and staleReads the records a claim read that were gone (for
// the tests).
var claimConflicts, staleReads atomic.Int64

func (d *queueDriver) mark(name string) string { return d.b.bid + d.r(name) }

// reserve orders picks so that the records no other claimant of this
// process is trying or holding come first (each part in its order), and
// marks the first n of those; it returns how many it marked (the first m
// of the order).
func (d *queueDriver) reserve(picks []string, n int) ([]string, int) {
	trying.mu.Lock()
	defer trying.mu.Unlock()
	free := make([]string, 0, len(picks))
	var busy []string
	for _, name := range picks {
		k := d.mark(name)
		if trying.gone[k] {
			continue
		}
		if trying.m[k] > 0 {
			busy = append(busy, name)
			continue
		}
		if len(free) < n {
			trying.m[k] = 1
		}
		free = append(free, name)
	}
	return append(free, busy...), min(n, len(free))
}

// settle keeps the marks of the records claimed, until their claims end
// (see unmark), and drops those of the others marked.
func (d *queueDriver) settle(marked []string, cs []driver.Claim) {
	claimed := map[string]bool{}
	for _, c := range cs {
		if qc, ok := c.Data.(*qclaim); ok {
			claimed[qc.rname] = true
		}
	}
	trying.mu.Lock()
	defer trying.mu.Unlock()
	for _, name := range marked {
		if !claimed[name] {
			delete(trying.m, d.mark(name))
		}
	}
}

// unmark drops the mark of a claim's record as the claim ends.
func (d *queueDriver) unmark(c *qclaim) {
	trying.mu.Lock()
	delete(trying.m, d.mark(c.rname))
	trying.mu.Unlock()
}

// gone records that the record name no longer exists; names are never
// made again (a retried job's record is named for its new time).
func (d *queueDriver) gone(name string) {
	k := d.mark(name)
	trying.mu.Lock()
	defer trying.mu.Unlock()
	if trying.gone[k] {
		return
	}
	trying.gone[k] = true
	if len(trying.ring) < goneKept {
		trying.ring = append(trying.ring, k)
		return
	}
	delete(trying.gone, trying.ring[trying.next])
	trying.ring[trying.next] = k
	trying.next = (trying.next + 1) % goneKept
}
