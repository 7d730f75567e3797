package pglock

import (
	"sync"
	"time"
)

// claimHead is where the claims of one queue in one Backend read the
// ready jobs from: the (ready_at, id) of the newest job they claimed.
// Every ready job before it has been claimed, is locked by another claim
// statement, or is a row version that has ended, and the index keeps the
// entries of ended versions until the table is vacuumed (new entries go
// in at the other end, so nothing reuses their pages): a claim that read
// from the first would walk the entries of every job claimed since.
//
// Lapsed claims are still read from the first: their index takes each
// claim's new entry where the ended claims' entries are, and the read is
// what marks those dead, so that the insert can reuse their space; read
// less often, that index grew with every job (BenchmarkQueueWorkers16).
//
// A job can still become ready behind the head: put by a transaction that
// committed after younger jobs were claimed, given back by another
// Backend, let go by a statement that failed after this one skipped it,
// stamped by a server clock set back. So a claim reads from the first when
// there is no head, when the last such read is claimFullEvery old, and at
// once again when a read from the head found nothing; this Backend's own
// give-backs clear the head. Such a job is thus claimed within
// claimFullEvery, rather than in its place, while younger jobs are being
// claimed (doc.go).
type claimHead struct {
	mu    sync.Mutex
	set   bool      // guarded by mu
	ready time.Time // guarded by mu
	id    int64     // guarded by mu
	full  time.Time // guarded by mu: when a claim last asked to read from the first
	gen   uint64    // guarded by mu: moved by clear
}

// claimFullEvery is how often a busy Backend's claims of a queue read the
// ready jobs from the first.
const claimFullEvery = time.Second

// claimFrom is where one claim statement reads the ready jobs from: the
// year 1, before any ready_at, when it reads from the first.
type claimFrom struct {
	ready time.Time
	id    int64
	first bool
	gen   uint64 // the head's, for advance
}

// from returns where a claim sent at now reads from: from the first when
// asked to (first), or when the head says so.
func (h *claimHead) from(now time.Time, first bool) claimFrom {
	h.mu.Lock()
	defer h.mu.Unlock()
	if first || !h.set || now.Sub(h.full) >= claimFullEvery {
		h.full = now
		return claimFrom{first: true, gen: h.gen}
	}
	return claimFrom{ready: h.ready, id: h.id, gen: h.gen}
}

// advance moves the head to a job that the claim read from f returned, if
// the job is newer and no clear came since the claim asked where to read
// from.
func (h *claimHead) advance(f claimFrom, ready time.Time, id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f.gen == h.gen && (!h.set || ready.After(h.ready) || (ready.Equal(h.ready) && id > h.id)) {
		h.set, h.ready, h.id = true, ready, id
	}
}

// clear makes the next claim read from the first, once jobs were given
// back to their places; a claim that ran meanwhile does not set the head
// again past them.
func (h *claimHead) clear() {
	h.mu.Lock()
	h.set = false
	h.gen++
	h.mu.Unlock()
}
