package etcdlock

import (
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A claim reads the first ready records and which of them are claimed.
// One range over every claim key of the queue would walk, until a
// compaction, the claim key of every job done since (see queue_window.go).
// Ids of j/ records grow in the order of the Puts and jobs mostly end in
// that order, so a claim reads the claim keys from the lowest id among the
// j/ records that the last read of the queue's handles in the Backend
// chose among (the claims of the jobs done before them are below it), and
// those of the r/ records it chose among by key (a job given back keeps
// its older id). A record the last read did not choose among, with an id
// below, is taken as unclaimed: the claim's transaction compares the claim
// key's absence, so a wrong guess costs a conflict, never a second claim.
// The first read, and one after a read of more than hintMost r/ records
// below, reads every claim key.
const hintMost = 32

// claimHint is what the last read chose among.
type claimHint struct {
	mu    sync.Mutex
	from  uint64   // guarded by mu; the lowest id of a j/ record (0: read every claim key; all ones: none)
	below []uint64 // guarded by mu; ids below from, read by key; replaced, never changed
}

func (h *claimHint) get() (uint64, []uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.from, h.below
}

// set records the records a read chose among.
func (h *claimHint) set(rs []record) {
	var from uint64
	for _, r := range rs {
		if r.pos >= 0 && (from == 0 || r.id < from) {
			from = r.id
		}
	}
	if from == 0 {
		from = ^uint64(0) // no j/ record: none by range
	}
	var below []uint64
	for _, r := range rs {
		if r.id < from {
			below = append(below, r.id)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case len(rs) == 0:
		// The next records are put later, above the last hint.
	case len(below) > hintMost:
		h.from, h.below = 0, nil
	default:
		h.from, h.below = from, below
	}
}

// claimReads are the reads of a claim's first request that tell which
// records are claimed: the claim keys from id from (0: all), and those of
// below.
func (d *queueDriver) claimReads(from uint64, below []uint64) []clientv3.Op {
	if from == 0 {
		return []clientv3.Op{clientv3.OpGet(d.dir+"c/", clientv3.WithPrefix(), clientv3.WithKeysOnly())}
	}
	ops := []clientv3.Op{clientv3.OpGet(fmt.Sprintf("%sc/%016x", d.dir, from), clientv3.WithRange(clientv3.GetPrefixRangeEnd(d.dir+"c/")), clientv3.WithKeysOnly())}
	for _, id := range below {
		ops = append(ops, clientv3.OpGet(d.ckey(id), clientv3.WithCountOnly()))
	}
	return ops
}

// claimedOf returns the ids found claimed by the responses of claimReads.
func claimedOf(below []uint64, rs []*etcdserverpb.ResponseOp) map[uint64]bool {
	claimed := map[uint64]bool{}
	for _, kv := range rs[0].GetResponseRange().Kvs {
		claimed[parseID(kv.Key)] = true
	}
	if len(rs) > 1 {
		for i, r := range rs[1:] {
			if r.GetResponseRange().Count > 0 {
				claimed[below[i]] = true
			}
		}
	}
	return claimed
}

// guessed reports whether a claim of picks took a record as unclaimed
// without reading its claim (its id below from, and not in below).
func guessed(from uint64, below []uint64, picks []record) bool {
	for _, p := range picks {
		if p.id < from && !slices.Contains(below, p.id) {
			return true
		}
	}
	return false
}
