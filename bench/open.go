//go:build linux

package main

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/ipc"
)

// openTables measure what a handle costs to open: open+Lock+Unlock+Close
// per operation on a name the process keeps open (known), on a name never
// used (fresh) and on one name with no other handle (recurring), beside gofrs/flock (New+Lock on a path) and a map of
// sync.Mutex; and what many distinct names leave in the namespace.
func openTables(cfg config, he *hostEnv) []*plannedTable {
	const sec = "Same host"
	subs := pick(he.subjects, func(s *subject) bool { return hasMutex(s) && s.id != "rawsem" })
	refs := []string{"sync.Mutex", "gofrs/flock"}
	ts := openPair(cfg, "", sec, "Mutex", refs, subs)
	// A name opened again with no other handle open (a lock per request
	// on a recurring id): what the last Close's reclaim costs the next open.
	ts = append(ts, newPlanned("open-recurring", sec, "Mutex handle on a name closed and opened again, no other handle open: open+Lock+Unlock+Close", "latency", "mutex",
		refs, subs, func(ctx context.Context, s *subject) (sample, error) {
			return openCycles(ctx, s, cfg.opens, func(int) string { return "open-recurring" })
		}))
	baton := pick(subs, func(s *subject) bool { return s.baton })
	ts = append(ts, newPlanned("residue", sec, fmt.Sprintf("Namespace residue: bytes of files left after %d distinct names (Lock, Unlock, Close each) and the linger", cfg.residue), "memory", "mutex",
		nil, baton, func(ctx context.Context, s *subject) (sample, error) {
			before, err := dirBytes(he.dir)
			if err != nil {
				return sample{}, err
			}
			run := freshRuns.Add(1)
			if _, err := openCycles(ctx, s, cfg.residue, func(i int) string { return fmt.Sprintf("residue-%s-%d-%d", s.id, run, i) }); err != nil {
				return sample{}, err
			}
			// Released files linger (local.WithLinger) before they go:
			// what is left is what stays once that is over.
			var after int64
			for deadline := time.Now().Add(ipc.DefaultLinger + time.Second); ; time.Sleep(10 * time.Millisecond) {
				if after, err = dirBytes(he.dir); err != nil {
					return sample{}, err
				}
				if after <= before || time.Now().After(deadline) {
					break
				}
			}
			return sample{Ops: int64(cfg.residue), Bytes: max(after-before, 0)}, nil
		}))
	return ts
}

// openPair is the open-known and open-fresh tables (ids prefixed by
// prefix) of what, over subs.
func openPair(cfg config, prefix, sec, what string, refs []string, subs []*subject) []*plannedTable {
	return []*plannedTable{
		newPlanned(prefix+"open-known", sec, what+" handle on a name already open: open+Lock+Unlock+Close", "latency", "mutex",
			refs, subs, func(ctx context.Context, s *subject) (sample, error) {
				keep, err := s.mutex(ctx, "open-known")
				if err != nil {
					return sample{}, err
				}
				defer keep.close()
				return openCycles(ctx, s, cfg.opens, func(int) string { return "open-known" })
			}),
		newPlanned(prefix+"open-fresh", sec, what+" handle on a fresh name: open+Lock+Unlock+Close", "latency", "mutex",
			refs, subs, func(ctx context.Context, s *subject) (sample, error) {
				run := freshRuns.Add(1)
				return openCycles(ctx, s, cfg.opens, func(i int) string { return fmt.Sprintf("fresh-%s-%d-%d", s.id, run, i) })
			}),
	}
}

// openNetTables are the open tables of a network section (ids prefixed by
// prefix): its baton subjects, beside a map of sync.Mutex and gofrs/flock
// (New+Lock on a path) of the same run.
func openNetTables(cfg config, he *hostEnv, prefix, sec, what string, subs []*subject) []*plannedTable {
	subs = pick(subs, func(s *subject) bool { return s.baton && hasMutex(s) })
	if len(subs) == 0 {
		return nil
	}
	refs := pick(he.subjects, func(s *subject) bool { return s.id == "sync" || s.id == "gofrs" })
	return networked(openPair(cfg, prefix, sec, what, []string{"sync.Mutex", "gofrs/flock"}, append(subs, refs...))...)
}

// freshRuns numbers the runs that need names never used before.
var freshRuns atomic.Int64

// openCycles opens a handle on name(i), locks, unlocks and closes it, n
// times, and reports the time of one cycle.
func openCycles(ctx context.Context, s *subject, n int, name func(int) string) (sample, error) {
	var h hist
	start := time.Now()
	for i := range n {
		t0 := time.Now()
		m, err := s.mutex(ctx, name(i))
		if err != nil {
			return sample{}, err
		}
		if err := m.lock(ctx); err != nil {
			m.close()
			return sample{}, err
		}
		if err := m.unlock(ctx); err != nil {
			m.close()
			return sample{}, err
		}
		if err := m.close(); err != nil {
			return sample{}, err
		}
		h.add(time.Since(t0))
	}
	el := time.Since(start)
	return sample{Ops: int64(n), Seconds: el.Seconds(), Throughput: float64(n) / el.Seconds(),
		P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max}, nil
}

// dirBytes sums the sizes of the regular files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		n += info.Size()
		return nil
	})
	return n, err
}
