//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonlock/baton/ipc"
)

// plannedTable is one table of the report and how to fill it.
type plannedTable struct {
	table    *table
	subjects []*subject
	run      func(ctx context.Context, s *subject) (sample, error)
	done     func() // after the last repetition, when set
	// network: a table of networked subjects, which get a discarded
	// warm-up repetition and more repetitions (cfg.netReps).
	network bool
	// pin: run the clients on the CPUs the servers are not pinned to.
	pin bool
	// decide: past its most repetitions, the table goes on, up to
	// decide times as many, while a goal checked on it is undecided
	// (unless the pass fixes the count: fewest = most). 0 or 1: no.
	decide int
	// extra lengthens the time limit of one run (runGuarded) for tables
	// whose runs are long by design.
	extra time.Duration
}

// decideFactor bounds the repetitions of the noisiest goal's table (see
// redis-uncontended), and goalFactor those of every other table a goal is
// checked on, as multiples of its most: a goal close to its bound gets a
// verdict, at most doubling the time of the table.
const (
	decideFactor = 4
	goalFactor   = 2
)

// reps returns the fewest and the most repetitions of t.
func (t *plannedTable) reps(cfg config) (int, int) {
	if t.network {
		return cfg.netReps, max(cfg.netReps, cfg.netMaxReps)
	}
	if t.table.Metric == "memory" {
		return cfg.reps, cfg.reps
	}
	return cfg.reps, max(cfg.reps, cfg.maxReps)
}

// undecided reports whether a goal checked on t has an interval that
// straddles its bound.
func undecided(t *table) bool {
	res := &results{Tables: []*table{t}}
	for _, g := range goals {
		if g.table == t.ID && checkGoal(res, g).Verdict == "undecided" {
			return true
		}
	}
	return false
}

// twin adds to t a second row of the subject named name, measured in the
// same repetitions: how far its ratio to the first row strays from 1 is
// the machine's own noise.
func (t *plannedTable) twin(name string) *plannedTable {
	for i, r := range t.table.Rows {
		if r.Subject == name {
			t.subjects = append(t.subjects, t.subjects[i])
			t.table.Rows = append(t.table.Rows, &row{Subject: name + " (again)", TwinOf: name})
			return t
		}
	}
	return t
}

func networked(ts ...*plannedTable) []*plannedTable {
	for _, t := range ts {
		t.network = true
	}
	return ts
}

func removeHostObjects(dir string) error {
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return err
	}
	return errors.Join(ipc.RemoveAll(ns), removeRawSems(dir))
}

// displayName names a subject in a table of one primitive.
func displayName(s *subject, prim string) string {
	if s.id == "sync" {
		switch prim {
		case "rw":
			return "sync.RWMutex"
		case "sem":
			return "buffered chan"
		}
	}
	return s.name
}

func pick(subs []*subject, ok func(*subject) bool) []*subject {
	var out []*subject
	for _, s := range subs {
		if ok(s) {
			out = append(out, s)
		}
	}
	return out
}

func hasMutex(s *subject) bool { return s.mutex != nil }
func hasRW(s *subject) bool    { return s.rw != nil }
func hasSem(s *subject) bool   { return s.sem != nil }

func newPlanned(id, section, title, metric, prim string, refs []string, subs []*subject, run func(ctx context.Context, s *subject) (sample, error)) *plannedTable {
	t := &table{ID: id, Section: section, Title: title, Metric: metric, Refs: refs}
	for _, s := range subs {
		t.Rows = append(t.Rows, &row{Subject: displayName(s, prim), Baton: s.baton})
	}
	return &plannedTable{table: t, subjects: subs, run: run}
}

// openN opens n handles of one primitive on key.
func openN(ctx context.Context, s *subject, prim, key string, n, permits int) ([]op, []op, error) {
	var ops, writes []op
	fail := func(err error) ([]op, []op, error) {
		_ = closeAll(ops)
		return nil, nil, err
	}
	for range n {
		switch prim {
		case "mutex", "client":
			open := s.mutex
			if prim == "client" {
				open = clientOf(s)
			}
			h, err := open(ctx, key)
			if err != nil {
				return fail(err)
			}
			ops = append(ops, mutexOp(h))
		case "rw":
			h, err := s.rw(ctx, key)
			if err != nil {
				return fail(err)
			}
			ops = append(ops, readOp(h))
			writes = append(writes, op{h.lock, h.unlock, func() error { return nil }})
		case "sem":
			h, err := s.sem(ctx, key, permits)
			if err != nil {
				return fail(err)
			}
			ops = append(ops, semOp(h))
		}
	}
	return ops, writes, nil
}

func uncontendedRun(prim, key string, permits int, cfg config, extra func() time.Duration) func(context.Context, *subject) (sample, error) {
	return func(ctx context.Context, s *subject) (sample, error) {
		ops, _, err := openN(ctx, s, prim, key, 1, permits)
		if err != nil {
			return sample{}, err
		}
		defer closeAll(ops)
		if err := warmUp(ctx, ops); err != nil {
			return sample{}, err
		}
		return uncontended(ctx, ops[0], cfg.dur, extra)
	}
}

func contendedRun(prim, key string, g, permits, writeEvery int, cfg config, extra func() time.Duration) func(context.Context, *subject) (sample, error) {
	return func(ctx context.Context, s *subject) (sample, error) {
		ops, writes, err := openN(ctx, s, prim, key, g, permits)
		if err != nil {
			return sample{}, err
		}
		defer closeAll(ops)
		if writeEvery == 0 {
			writes = nil
		}
		if err := warmUp(ctx, ops, writes...); err != nil {
			return sample{}, err
		}
		return contended(ctx, ops, writes, writeEvery, cfg.dur, extra)
	}
}

func handoffRun(key string, n int, settle time.Duration) func(context.Context, *subject) (sample, error) {
	return func(ctx context.Context, s *subject) (sample, error) {
		// Holder and waiter are separate clients.
		a, err := clientOf(s)(ctx, key)
		if err != nil {
			return sample{}, err
		}
		defer a.close()
		b, err := clientOf(s)(ctx, key)
		if err != nil {
			return sample{}, err
		}
		defer b.close()
		if err := warmUp(ctx, []op{mutexOp(a), mutexOp(b)}); err != nil {
			return sample{}, err
		}
		return handoff(ctx, a, b, n, settle)
	}
}

// decideGoals makes every table of ts that a goal is checked on run on
// while the goal is undecided (goalFactor), unless it has its own factor;
// the pass calls it on all its tables, wherever they were planned.
func decideGoals(ts []*plannedTable) []*plannedTable {
	for _, t := range ts {
		if t.decide == 0 && hasGoal(t.table.ID) {
			t.decide = goalFactor
		}
	}
	return ts
}

// hasGoal reports whether a goal is checked on the table id.
func hasGoal(id string) bool {
	return slices.ContainsFunc(goals, func(g goal) bool { return g.table == id })
}

// plan lists the tables of a pass in the order they run.
func plan(cfg config, he *hostEnv, ce *clusterEnv, dir string, want map[string]bool) []*plannedTable {
	var ts []*plannedTable
	host := he.subjects
	if want["host"] {
		const sec = "Same host"
		mut := pick(host, hasMutex)
		mrefs := []string{"sync.Mutex", "raw flock", "gofrs/flock"}
		ts = append(ts, newPlanned("mutex-uncontended", sec, "Mutex, uncontended Lock+Unlock", "throughput", "mutex",
			mrefs, append(slices.Clip(mut), tokenWordSubject()), uncontendedRun("mutex", "uncontended", 0, cfg, nil)).twin("sync.Mutex"))
		for _, g := range cfg.gs {
			ts = append(ts, newPlanned(fmt.Sprintf("mutex-g%d", g), sec, fmt.Sprintf("Mutex, %d goroutines on one key (one handle each)", g), "throughput", "mutex",
				mrefs, mut, contendedRun("mutex", fmt.Sprintf("g%d", g), g, 0, 0, cfg, nil)))
		}
		procs := pick(mut, func(s *subject) bool { return s.proc })
		prefs := []string{"raw flock", "gofrs/flock", "raw semop"}
		for _, p := range cfg.ps {
			pp := &procPool{}
			t := newPlanned(fmt.Sprintf("mutex-p%d", p), sec, fmt.Sprintf("Mutex, %d processes on one key", p), "throughput", "mutex",
				prefs, procs, func(ctx context.Context, s *subject) (sample, error) {
					return procContended(pp, s, dir, "mutex", fmt.Sprintf("p%d", p), p, 0, cfg.dur)
				})
			t.done = pp.close
			ts = append(ts, t)
		}
		ts = append(ts, newPlanned("mutex-handoff", sec, "Mutex handoff: holder's Unlock to the blocked waiter holding", "latency", "mutex",
			[]string{"sync.Mutex", "raw flock"}, mut, handoffRun("handoff", cfg.handoffs, time.Millisecond)))
		ts = append(ts, newPlanned("mutex-kill", sec, "Holder SIGKILLed: kill to a waiter in another process holding", "latency", "mutex",
			[]string{"raw flock", "raw semop"}, procs, func(ctx context.Context, s *subject) (sample, error) {
				return killGrant(ctx, s, dir, "mutex", "kill", cfg.kills)
			}))

		rw := pick(host, hasRW)
		rrefs := []string{"raw semop", "sync.RWMutex", "raw flock"}
		ts = append(ts, newPlanned("rw-uncontended-read", sec, "RWMutex, uncontended RLock+RUnlock", "throughput", "rw",
			rrefs, rw, uncontendedRun("rw", "uncontended", 0, cfg, nil)))
		ts = append(ts, newPlanned("rw-read-heavy", sec, fmt.Sprintf("RWMutex, %d goroutines, 95%% reads", cfg.rwG), "throughput", "rw",
			rrefs, rw, contendedRun("rw", "readheavy", cfg.rwG, 0, 20, cfg, nil)))
		ts = append(ts, newPlanned("rw-kill", sec, "RWMutex writer SIGKILLed: kill to a writer in another process holding", "latency", "rw",
			[]string{"raw flock", "raw semop"}, pick(rw, func(s *subject) bool { return s.proc }), func(ctx context.Context, s *subject) (sample, error) {
				return killGrant(ctx, s, dir, "rw", "kill", cfg.kills)
			}))

		sem := pick(host, hasSem)
		srefs := []string{"raw semop", "buffered chan"}
		ts = append(ts, newPlanned("sem-uncontended", sec, "Semaphore, uncontended Acquire(1)+Release(1)", "throughput", "sem",
			srefs, sem, uncontendedRun("sem", "uncontended", 4, cfg, nil)))
		for _, n := range cfg.permits {
			ts = append(ts, newPlanned(fmt.Sprintf("sem-n%d", n), sec, fmt.Sprintf("Semaphore, %d permits, %d contenders", n, 4*n), "throughput", "sem",
				srefs, sem, contendedRun("sem", "contended", 4*n, n, 0, cfg, nil)))
		}
		for _, p := range cfg.semPs {
			pp := &procPool{}
			t := newPlanned(fmt.Sprintf("sem-p%d", p), sec, fmt.Sprintf("Semaphore, capacity 1, %d processes", p), "throughput", "sem",
				[]string{"raw semop"}, pick(sem, func(s *subject) bool { return s.proc }), func(ctx context.Context, s *subject) (sample, error) {
					return procContended(pp, s, dir, "sem", fmt.Sprintf("p%d", p), p, 1, cfg.dur)
				})
			t.done = pp.close
			ts = append(ts, t)
		}
		ts = append(ts, openTables(cfg, he)...)
		ts = append(ts, rateTables(cfg, he)...)
		ts = append(ts, newPlanned("sem-kill", sec, "Semaphore (capacity 1) permit holder SIGKILLed: kill to a waiter in another process holding", "latency", "sem",
			[]string{"raw semop"}, pick(sem, func(s *subject) bool { return s.proc }), func(ctx context.Context, s *subject) (sample, error) {
				return killGrant(ctx, s, dir, "sem", "kill", cfg.kills)
			}))

		// Waiting processes, their holder alive: CPU per second of waiting.
		idle := func(id, title, prim string, n int, subs []*subject) {
			ts = append(ts, newPlanned(id, sec, title+": CPU per second of waiting (p50 of the waiters, p99 the worst)", "latency", prim,
				nil, pick(subs, func(s *subject) bool {
					return s.proc && (s.baton && !strings.Contains(s.name, "sysv") || s.name == "raw flock" || s.name == "raw semop")
				}),
				idleRun(dir, prim, n, cfg.idleWindow)))
		}
		idle("idle-mutex", "Mutex, a process waiting behind a live holder", "mutex", 1, mut)
		idle("idle-rw-read", "RWMutex, a reader waiting behind a live writer", "rw-read", 1, rw)
		idle("idle-rw-write", "RWMutex, a writer waiting behind a live writer", "rw-write", 1, rw)
		idle("idle-sem", fmt.Sprintf("Semaphore of 4, all held, %d processes waiting", cfg.idleSem), "sem", cfg.idleSem, sem)
		ts = append(ts, chanTables(cfg, dir)...)
		ts = append(ts, queueLocalTables(cfg, dir)...)
	}

	var redisSubs, etcdSubs []*subject
	for _, s := range ce.subjects {
		switch s.kind {
		case "redis":
			redisSubs = append(redisSubs, s)
		case "etcd":
			etcdSubs = append(etcdSubs, s)
		}
	}
	extra := ce.serverCPU
	if want["redis"] && len(redisSubs) > 0 {
		const sec = "Redis"
		// The fair line is the floor of the 16-client table only.
		line := pick(redisSubs, func(s *subject) bool { return s.id == "rawline" })
		redisSubs = pick(redisSubs, func(s *subject) bool { return s.id != "rawline" })
		single := pick(redisSubs, func(s *subject) bool { return s.id != "redsync3" && s.id != "bredlock" && s.id != "rawredlock" })
		// The raw Redlock floor only serves the uncontended table, as the
		// measure of what asking three nodes costs on this machine.
		multi := pick(redisSubs, func(s *subject) bool { return s.id != "rawredlock" })
		refs := []string{"raw SET NX + EVAL", "redsync", "bsm/redislock", "baton redis"}
		var rts []*plannedTable
		rts = append(rts, newPlanned("redis-uncontended", sec, "Redis mutex, uncontended Lock+Unlock", "throughput", "mutex",
			append(refs, "raw Redlock 3 nodes"), redisSubs, uncontendedRun("mutex", "uncontended", 0, cfg, extra)).twin("raw SET NX + EVAL"))
		// Redlock's cost over the bare algorithm is close to its bound,
		// and three servers make it the noisiest ratio of the table.
		rts[0].decide = decideFactor
		for _, g := range cfg.gs {
			rts = append(rts, newPlanned(fmt.Sprintf("redis-g%d", g), sec, fmt.Sprintf("Redis mutex, %d goroutines on one key (one handle each)", g), "throughput", "mutex",
				refs[1:], single, contendedRun("mutex", fmt.Sprintf("g%d", g), g, 0, 0, cfg, extra)))
		}
		g := cfg.gs[len(cfg.gs)-1]
		rts = append(rts, newPlanned(fmt.Sprintf("redis-c%d", g), sec, fmt.Sprintf("Redis mutex, %d clients on one key (a Backend each)", g), "throughput", "mutex",
			append([]string{"raw fair BLPOP line"}, refs[1:]...), append(line, single...), contendedRun("client", fmt.Sprintf("c%d", g), g, 0, 0, cfg, extra)).twin("bsm/redislock"))
		rts = append(rts, newPlanned("redis-handoff", sec, "Redis mutex handoff: holder's Unlock to the blocked waiter holding", "latency", "mutex",
			refs[1:], multi, handoffRun("handoff", cfg.handoffs, 3*time.Millisecond)))
		rts = append(rts, queueRedisTables(cfg, ce, extra)...)
		rts = append(rts, redisRateTables(cfg, ce, extra)...)
		for _, t := range networked(rts...) {
			t.pin = true
		}
		ts = append(ts, rts...)
		ts = append(ts, openNetTables(cfg, he, "redis-", sec, "Redis mutex", redisSubs)...)
		if len(ce.clients) > 0 {
			probes := map[string]residueProbe{"bredis": redisProbe(ce.clients[0]), "bredlock": redisProbe(ce.clients...)}
			bs := pick(redisSubs, func(s *subject) bool { return probes[s.id].objects != nil })
			ts = append(ts, residueTable("redis-residue", sec, residueTitle("Redis", "keys", cfg.residue), cfg.residue, bs, probes))
		}
	}
	if want["etcd"] && len(etcdSubs) > 0 {
		const sec = "etcd"
		refs := []string{"etcd concurrency"}
		ts = append(ts, networked(newPlanned("etcd-uncontended", sec, "etcd mutex, uncontended Lock+Unlock", "throughput", "mutex",
			refs, etcdSubs, uncontendedRun("mutex", "uncontended", 0, cfg, nil)).twin("etcd concurrency"))...)
		for _, g := range cfg.gs {
			ts = append(ts, networked(newPlanned(fmt.Sprintf("etcd-g%d", g), sec, fmt.Sprintf("etcd mutex, %d goroutines on one key (one handle each)", g), "throughput", "mutex",
				refs, etcdSubs, contendedRun("mutex", fmt.Sprintf("g%d", g), g, 0, 0, cfg, nil)))...)
		}
		ts = append(ts, networked(newPlanned("etcd-handoff", sec, "etcd mutex handoff: holder's Unlock to the blocked waiter holding", "latency", "mutex",
			refs, etcdSubs, handoffRun("handoff", cfg.handoffs, 15*time.Millisecond)))...)
		if ce.etcd != nil {
			// Each kill costs a lease's TTL: a third of the other kill tables'.
			ts = append(ts, etcdKillTable(sec, ce.etcd.addr, max(1, cfg.kills/3), etcdSubs))
		}
		ts = append(ts, openNetTables(cfg, he, "etcd-", sec, "etcd mutex", etcdSubs)...)
		if ce.etcdC != nil {
			probes := map[string]residueProbe{"betcd": etcdProbe(ce.etcdC)}
			bs := pick(etcdSubs, func(s *subject) bool { return probes[s.id].objects != nil })
			ts = append(ts, residueTable("etcd-residue", sec, residueTitle("etcd", "keys", cfg.residue), cfg.residue, bs, probes))
		}
	}
	if (want["redis"] || want["etcd"]) && len(ce.subjects) > 0 {
		const sec = "Cluster semaphores and RW locks"
		csem := pick(ce.subjects, hasSem)
		if len(csem) > 0 {
			n := cfg.permits[len(cfg.permits)-1]
			ts = append(ts, networked(newPlanned("cluster-sem", sec, fmt.Sprintf("Semaphore, %d permits, %d contenders", n, 4*n), "throughput", "sem",
				nil, csem, contendedRun("sem", "contended", 4*n, n, 0, cfg, extra)))...)
		}
		crw := pick(ce.subjects, hasRW)
		if len(crw) > 0 {
			ts = append(ts, networked(newPlanned("cluster-rw", sec, fmt.Sprintf("RWMutex, %d goroutines, 95%% reads", cfg.rwG), "throughput", "rw",
				nil, crw, contendedRun("rw", "readheavy", cfg.rwG, 0, 20, cfg, extra)))...)
		}
	}
	if want["memory"] {
		const sec = "Memory"
		all := pick(append(append([]*subject{}, host...), ce.subjects...), hasMutex)
		ts = append(ts, newPlanned("mem-lock", sec, fmt.Sprintf("Go heap per lock (%d handles on distinct names)", cfg.memK), "memory", "mutex",
			[]string{"gofrs/flock"}, all, func(ctx context.Context, s *subject) (sample, error) {
				return memory(ctx, s.mutex, cfg.memK, true, s.id)
			}))
		ts = append(ts, newPlanned("mem-handle", sec, fmt.Sprintf("Go heap per handle (%d handles on one name)", cfg.memK), "memory", "mutex",
			[]string{"gofrs/flock"}, all, func(ctx context.Context, s *subject) (sample, error) {
				return memory(ctx, s.mutex, cfg.memK, false, s.id)
			}))
	}
	return ts
}
