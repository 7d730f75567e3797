package zklock

import (
	"math/rand/v2"
	"slices"
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
// takes the oldest; claimants of other processes are not seen: a
// conflict with them is read again, and widens the queue's spread.
//
// gone keeps the last goneKept records this process saw deleted (acked,
// retried, buried, or found missing), oldest first in ring: a claimant's
// read names jobs done since, and under a steady flow the jobs done while
// it walked such a list one read at a time would outrun it.
//
// spread is, by queue (behind its Backend's id), how many of the oldest
// unclaimed jobs a claim chooses among, less one: four more for each
// claim that found its job taken by a claimant of another process, one
// fewer for each that did not, so that claimants of several processes
// mostly take different jobs and a lone claimant soon takes the oldest
// again.
var trying = struct {
	mu     sync.Mutex
	m      map[string]int
	gone   map[string]bool
	ring   []string
	next   int // the oldest entry of ring once it is full
	spread map[string]int
}{m: map[string]int{}, gone: map[string]bool{}, spread: map[string]int{}}

// spreadMost bounds a queue's spread.
const spreadMost = 16

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

// spreadOut rotates the unclaimed ready records picks, oldest first, so
// that they start at one of the first few, as many as the queue's spread
// allows (see trying).
func (d *queueDriver) spreadOut(picks []string) []string {
	trying.mu.Lock()
	k := min(trying.spread[d.b.bid+d.dir]+1, len(picks))
	trying.mu.Unlock()
	if k < 2 {
		return picks
	}
	off := rand.IntN(k)
	return slices.Concat(picks[off:], picks[:off])
}

// conflicted moves the queue's spread after a claim: up when another
// claimant had come between, down when not.
func (d *queueDriver) conflicted(yes bool) {
	k := d.b.bid + d.dir
	trying.mu.Lock()
	defer trying.mu.Unlock()
	switch s := trying.spread[k]; {
	case yes:
		trying.spread[k] = min(s+4, spreadMost)
	case s > 1:
		trying.spread[k] = s - 1
	case s == 1:
		delete(trying.spread, k)
	}
}
