//go:build linux

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// goal is one performance goal of the project, checked on one table.
type goal struct {
	name    string
	table   string
	subject string
	// kind: "cost" (subject's cost over refs[0]'s, at most bound), "speedup"
	// (the best of refs' cost over the subject's, at least bound),
	// "fairness" (at least bound), "worst_wait", "median" and "p99" (the
	// worst wait, the median or the 99th percentile latency, at most bound,
	// in ns), "bytes" (the memory figure, at most bound), "left" (objects
	// a network backend left after the wait of a residue run, at most
	// bound).
	kind  string
	refs  []string
	bound float64
}

// goals lists the project's performance goals in the order of the report.
var goals = []goal{
	{"futex Mutex, uncontended Lock+Unlock ≤ 1.5× sync.Mutex", "mutex-uncontended", "baton local/futex", "cost", []string{"sync.Mutex"}, 1.5},
	{"Redis, uncontended Lock+Unlock ≤ 1.1× the raw floor", "redis-uncontended", "baton redis", "cost", []string{"raw SET NX + EVAL"}, 1.1},
	{"Redlock, uncontended Lock+Unlock ≤ 1.15× the bare algorithm", "redis-uncontended", "baton redlock 3 nodes", "cost", []string{"raw Redlock 3 nodes"}, 1.15},
	{"etcd, uncontended Lock+Unlock ≤ 1.1× concurrency.Mutex", "etcd-uncontended", "baton etcd", "cost", []string{"etcd concurrency"}, 1.1},
	{"etcd, holder SIGKILLed (2 s leases): kill to the next grant p99 ≤ 2.6 s (the TTL, etcd's 0.5 s lease loop, a handoff)", "etcd-kill", "baton etcd", "p99", nil, float64(etcdKillBound)},
	{"Redis, 16 clients on one name: throughput ≥ 1.2× the best peer", "redis-c16", "baton redis", "speedup", []string{"redsync", "bsm/redislock"}, 1.2},
	{"Redis, 16 clients on one name: fairness ≥ 0.9", "redis-c16", "baton redis", "fairness", nil, 0.9},
	{"etcd, 16 goroutines on one name: throughput ≥ 2× the best peer", "etcd-g16", "baton etcd", "speedup", []string{"etcd concurrency"}, 2},
	{"etcd, 16 goroutines on one name: fairness ≥ 0.9", "etcd-g16", "baton etcd", "fairness", nil, 0.9},
	{"RWMutex, uncontended RLock+RUnlock ≤ 3× sync.RWMutex", "rw-uncontended-read", "baton local/shm", "cost", []string{"sync.RWMutex"}, 3},
	{"RWMutex, 16 goroutines, 95% reads: throughput ≥ 10× raw semop", "rw-read-heavy", "baton local/shm", "speedup", []string{"raw semop"}, 10},
	{"Semaphore, uncontended Acquire(1)+Release(1) ≤ 3× a buffered channel", "sem-uncontended", "baton local/shm", "cost", []string{"buffered chan"}, 3},
	{"Semaphore, capacity 1, 4 processes: throughput ≥ 20× raw semop", "sem-p4", "baton local/shm", "speedup", []string{"raw semop"}, 20},
	{"Semaphore, capacity 1, 4 processes: worst wait ≤ 10 ms", "sem-p4", "baton local/shm", "worst_wait", nil, 10e6},
	{"RWMutex, writer SIGKILLed: kill to the next grant p99 ≤ 5 ms", "rw-kill", "baton local/shm", "p99", nil, 5e6},
	{"Semaphore, permit holder SIGKILLed: kill to the next grant p99 ≤ 5 ms", "sem-kill", "baton local/shm", "p99", nil, 5e6},
	{"futex Mutex, holder SIGKILLed: kill to the next grant p99 ≤ 5 ms", "mutex-kill", "baton local/futex", "p99", nil, 5e6},
	{"flock Mutex, holder SIGKILLed: kill to the next grant p99 ≤ 5 ms", "mutex-kill", "baton local/flock", "p99", nil, 5e6},
	{"futex Mutex, waiting process, holder alive: CPU ≤ 0.1% of a core", "idle-mutex", "baton local/futex", "p99", nil, 1e6},
	{"flock Mutex, waiting process, holder alive: CPU ≤ 0.1% of a core", "idle-mutex", "baton local/flock", "p99", nil, 1e6},
	{"RWMutex, waiting reader, writer alive: CPU ≤ 0.1% of a core", "idle-rw-read", "baton local/shm", "p99", nil, 1e6},
	{"RWMutex, waiting writer, writer alive: CPU ≤ 0.1% of a core", "idle-rw-write", "baton local/shm", "p99", nil, 1e6},
	{"Semaphore of 4, 64 waiting processes: CPU ≤ 0.1% of a core each", "idle-sem", "baton local/shm", "p99", nil, 1e6},
	{"futex Mutex, open+Lock+Unlock+Close on a name already open ≤ 2 µs median", "open-known", "baton local/futex", "median", nil, 2e3},
	{"futex Mutex, open+Lock+Unlock+Close on a fresh name ≤ 20 µs median", "open-fresh", "baton local/futex", "median", nil, 20e3},
	{"futex Mutex, files left after many distinct names ≤ 4 KiB (not growing with the count)", "residue", "baton local/futex", "bytes", nil, 4096},
	{"Rate limit on the same host: Allow ≤ 3× golang.org/x/time/rate in one process", "rate-allow", "baton local rate limit (word)", "cost", []string{"x/time/rate"}, 3},
	{"Redis, keys left after many distinct names and the idle time ≤ 4 (bounded, not growing with the count)", "redis-residue", "baton redis", "left", nil, 4},
	{"Redlock, keys left after many distinct names and the idle time ≤ 4 (bounded, not growing with the count)", "redis-residue", "baton redlock 3 nodes", "left", nil, 4},
	{"etcd, keys left after many distinct names and the idle time ≤ 4 (bounded, not growing with the count)", "etcd-residue", "baton etcd", "left", nil, 4},
	{"PostgreSQL, rows left after many distinct names and the idle time ≤ 4 (bounded, not growing with the count)", "pg-residue", "baton pglock", "left", nil, 4},
	{"MariaDB, rows left after many distinct names and the idle time ≤ 4 (bounded, not growing with the count)", "mysql-residue", "baton mysqllock", "left", nil, 4},
	{"ZooKeeper, znodes left after many distinct names and the idle time ≤ 4 (bounded, not growing with the count)", "zk-residue", "baton zklock", "left", nil, 4},
	{"PostgreSQL, uncontended Lock+Unlock ≤ 1.3× the raw floor", "pg-uncontended", "baton pglock", "cost", []string{"raw pg_advisory_lock"}, 1.3},
	{"PostgreSQL, handoff to another client ≤ 2 ms median", "pg-handoff", "baton pglock", "median", nil, 2e6},
	{"PostgreSQL, 16 clients on one name: fairness ≥ 0.9", "pg-c16", "baton pglock", "fairness", nil, 0.9},
	{"MariaDB, uncontended Lock+Unlock ≤ 1.3× the raw floor", "mysql-uncontended", "baton mysqllock", "cost", []string{"raw GET_LOCK"}, 1.3},
	{"MariaDB, handoff to another client ≤ 2 ms median", "mysql-handoff", "baton mysqllock", "median", nil, 2e6},
	{"MariaDB, 16 clients on one name: fairness ≥ 0.9", "mysql-c16", "baton mysqllock", "fairness", nil, 0.9},
	{"ZooKeeper, uncontended Lock+Unlock ≤ 1.2× zk.NewLock", "zk-uncontended", "baton zklock", "cost", []string{"zk.NewLock"}, 1.2},
	{"ZooKeeper, 16 goroutines on one name: faster than zk.NewLock", "zk-g16", "baton zklock", "speedup", []string{"zk.NewLock"}, 1},
	{"ZooKeeper, 16 clients on one name: fairness ≥ 0.9", "zk-c16", "baton zklock", "fairness", nil, 0.9},
	{"Channel, 64 B between processes: one-way p50 ≤ 1/3 of a Unix socket pair", "chan-pingpong-64", "baton local channel", "cost", []string{"Unix socket pair"}, 1.0 / 3},
	{"Channel, 64 B in batches of 64: throughput ≥ 10× a Unix socket pair", "chan-batch64", "baton local channel", "speedup", []string{"Unix socket pair"}, 10},
	// Work queues, same host and Redis (issue 35).
	{"Queue, same host, Put+Claim+Ack, 2 processes: throughput ≥ 2× System V msgq", "queue-c1", "baton local queue", "speedup", []string{"System V msgq"}, 2},
	{"Queue, same host, Put+Claim+Ack, 4 claimant processes: throughput ≥ 2× System V msgq", "queue-c4", "baton local queue", "speedup", []string{"System V msgq"}, 2},
	{"Queue, same host, claim latency after a Put p50 ≤ 20 µs", "queue-latency", "baton local queue", "median", nil, 20e3},
	{"Queue, same host, idle claimant: CPU ≤ 0.1% of a core", "idle-queue", "baton local queue", "p99", nil, 1e6},
	{"Redis queue, uncontended Put+Claim+Ack ≤ 1.3× the raw XADD + XREADGROUP + XACK floor", "redis-queue-uncontended", "baton redis", "cost", []string{"raw XADD + XREADGROUP + XACK"}, 1.3},
	{"Redis queue, 16 workers: throughput ≥ 2× asynq", "redis-queue-w16", "baton redis", "speedup", []string{"asynq"}, 2},
	{"Redis queue, 16 workers: fairness of claims ≥ 0.9", "redis-queue-w16", "baton redis", "fairness", nil, 0.9},
	// Queues on PostgreSQL, MariaDB, etcd and ZooKeeper (queue_sql.go, queue_etcdzk.go).
	{"PostgreSQL queue, uncontended Put+Claim+Ack ≤ 1.3× the raw SKIP LOCKED floor", "pg-queue-uncontended", "baton pglock", "cost", []string{"raw SKIP LOCKED (pgx)"}, 1.3},
	{"PostgreSQL queue, uncontended Put+Claim+Ack ≤ 1.3× the raw leased claim", "pg-queue-uncontended", "baton pglock", "cost", []string{"raw leased claim (pgx)"}, 1.3},
	{"PostgreSQL queue, 16 workers: throughput ≥ 2× River", "pg-queue-w16", "baton pglock", "speedup", []string{"River"}, 2},
	{"PostgreSQL queue, 16 workers: fairness ≥ 0.9", "pg-queue-w16", "baton pglock", "fairness", nil, 0.9},
	{"MariaDB queue, uncontended Put+Claim+Ack ≤ 1.3× the raw SKIP LOCKED floor", "mysql-queue-uncontended", "baton mysqllock", "cost", []string{"raw SKIP LOCKED (MariaDB)"}, 1.3},
	{"MariaDB queue, uncontended Put+Claim+Ack ≤ 1.3× the raw leased claim", "mysql-queue-uncontended", "baton mysqllock", "cost", []string{"raw leased claim (MariaDB)"}, 1.3},
	{"MariaDB queue, 16 workers: fairness ≥ 0.9", "mysql-queue-w16", "baton mysqllock", "fairness", nil, 0.9},
	{"etcd queue, uncontended Put+Claim+Ack ≤ 1.3× the raw Put + Get + Txn floor", "etcd-queue-uncontended", "baton etcd", "cost", []string{"raw Put + Get + Txn (etcd)"}, 1.3},
	{"etcd queue, uncontended Put+Claim+Ack ≤ 1.3× the raw leased claim", "etcd-queue-uncontended", "baton etcd", "cost", []string{"raw leased claim (etcd)"}, 1.3},
	{"etcd queue, 16 workers: fairness ≥ 0.9", "etcd-queue-w16", "baton etcd", "fairness", nil, 0.9},
	{"ZooKeeper queue, uncontended Put+Claim+Ack ≤ 1.3× the raw sequential-znode floor", "zk-queue-uncontended", "baton zklock", "cost", []string{"raw sequential znodes"}, 1.3},
	{"ZooKeeper queue, uncontended Put+Claim+Ack ≤ 1.3× the raw leased claim", "zk-queue-uncontended", "baton zklock", "cost", []string{"raw leased claim (ZooKeeper)"}, 1.3},
	{"ZooKeeper queue, 16 workers: fairness ≥ 0.9", "zk-queue-w16", "baton zklock", "fairness", nil, 0.9},
	{"Channel, 64 B in batches of 64: ≥ 10 M messages/s (≤ 100 ns each)", "chan-batch64", "baton local channel", "median", nil, 100},
	{"Channel, 4 KiB between processes: one-way p50 ≤ 1/3 of a Unix socket pair", "chan-pingpong-4096", "baton local channel", "cost", []string{"Unix socket pair"}, 1.0 / 3},
	{"Channel, receiving process blocked on an empty channel: CPU ≤ 0.1% of a core", "idle-chan", "baton local channel", "p99", nil, 1e6},
	// The one-to-one option must pay for itself against the ring it replaces.
	{"Channel, one-to-one, 64 B in batches of 64: throughput ≥ 1.5× the many-to-many channel", "chan-batch64", "baton local channel, one-to-one", "speedup", []string{"baton local channel"}, 1.5},
	{"Channel, one-to-one, 64 B between processes: one-way p50 ≤ 0.9× the many-to-many channel", "chan-pingpong-64", "baton local channel, one-to-one", "cost", []string{"baton local channel"}, 0.9},
	// Rate limit on Redis (issue 38): the nearest served peer is one raw script call.
	{"Rate limit on Redis: Allow ≤ 1.2× one raw GCRA script call", "redis-rate-allow", "baton redis", "cost", []string{"raw GCRA script"}, 1.2},
}

// goalResult is a goal's verdict in one run.
type goalResult struct {
	Goal     string   `json:"goal"`
	Table    string   `json:"table"`
	Subject  string   `json:"subject"`
	Kind     string   `json:"kind"`
	Refs     []string `json:"refs,omitempty"`
	Bound    float64  `json:"bound"`
	Measured interval `json:"measured"`
	// Best is the peer the speedup was measured against (lowest median cost).
	Best    string `json:"best_peer,omitempty"`
	Verdict string `json:"verdict"` // met, not met, undecided, not measured, failed
	Why     string `json:"why,omitempty"`
}

// checkGoals evaluates every goal on the tables of res.
func checkGoals(res *results) []goalResult {
	var out []goalResult
	for _, g := range goals {
		out = append(out, checkGoal(res, g))
	}
	return out
}

func checkGoal(res *results, g goal) goalResult {
	gr := goalResult{Goal: g.name, Table: g.table, Subject: g.subject, Kind: g.kind, Refs: g.refs, Bound: g.bound,
		Measured: unknown(math.NaN()), Verdict: "not measured"}
	var t *table
	for _, tb := range res.Tables {
		if tb.ID == g.table {
			t = tb
		}
	}
	if t == nil {
		gr.Why = "table not in this run"
		return gr
	}
	r := t.row(g.subject)
	if r == nil {
		gr.Why = "subject not in the table"
		return gr
	}
	if r.failed() {
		gr.Verdict, gr.Why = "failed", g.subject+": "+r.Err
		return gr
	}
	label := "goal/" + g.table + "/" + g.name
	atMost := true
	switch g.kind {
	case "cost", "speedup":
		cols := [][]float64{t.costs(r)}
		var names []string
		for _, ref := range g.refs {
			rr := t.row(ref)
			if rr == nil {
				continue
			}
			if rr.failed() {
				gr.Verdict, gr.Why = "failed", ref+": "+rr.Err
				return gr
			}
			cols = append(cols, t.costs(rr))
			names = append(names, ref)
		}
		if len(names) == 0 {
			gr.Why = "reference not in the table"
			return gr
		}
		if g.kind == "cost" {
			gr.Measured = pairedStat(label, cols[:2], func(m []float64) float64 { return m[0] / m[1] })
			break
		}
		atMost = false
		best := 0
		for j := range names {
			if median(cols[j+1]) < median(cols[best+1]) {
				best = j
			}
		}
		gr.Best = names[best]
		gr.Measured = pairedStat(label, cols, func(m []float64) float64 {
			lo := math.Inf(1)
			for _, v := range m[1:] {
				lo = min(lo, v)
			}
			return lo / m[0]
		})
	case "fairness":
		atMost = false
		v := make([]float64, len(r.Samples))
		for i, s := range r.Samples {
			v[i] = s.Fairness
		}
		gr.Measured = medianCI(label, v)
	case "worst_wait", "median", "p99", "bytes", "left":
		v := make([]float64, len(r.Samples))
		for i, s := range r.Samples {
			switch g.kind {
			case "bytes":
				v[i] = float64(s.Bytes)
			case "left":
				v[i] = float64(s.LeftAfterWait)
			case "median":
				v[i] = float64(s.P50)
			case "p99":
				v[i] = float64(s.P99)
			default:
				v[i] = float64(s.WorstWait)
			}
		}
		gr.Measured = medianCI(label, v)
	}
	gr.Verdict = verdict(gr.Measured, g.bound, atMost)
	return gr
}

// shown prints the measured figure of a goal with its interval.
func (gr goalResult) shown() string {
	iv := gr.Measured
	if math.IsNaN(iv.Value) {
		return "—"
	}
	switch gr.Kind {
	case "fairness":
		if !iv.known() {
			return fmt.Sprintf("%.2f", iv.Value)
		}
		return fmt.Sprintf("%.2f [%.2f–%.2f]", iv.Value, iv.Lo, iv.Hi)
	case "worst_wait", "median", "p99":
		if !iv.known() {
			return fmtDur(iv.Value)
		}
		return fmt.Sprintf("%s [%s–%s]", fmtDur(iv.Value), fmtDur(iv.Lo), fmtDur(iv.Hi))
	case "left":
		if !iv.known() {
			return fmt.Sprintf("%.0f", iv.Value)
		}
		return fmt.Sprintf("%.0f [%.0f–%.0f]", iv.Value, iv.Lo, iv.Hi)
	case "bytes":
		if !iv.known() {
			return fmtBytes(iv.Value)
		}
		return fmt.Sprintf("%s [%s–%s]", fmtBytes(iv.Value), fmtBytes(iv.Lo), fmtBytes(iv.Hi))
	case "speedup":
		return fmtRatio(iv) + " " + gr.Best
	}
	return fmtRatio(iv)
}

func (gr goalResult) verdictText() string {
	if gr.Why != "" {
		return gr.Verdict + " (" + gr.Why + ")"
	}
	return gr.Verdict
}

// goalsMarkdown renders the goals as a Markdown table.
func goalsMarkdown(w io.Writer, grs []goalResult) {
	fmt.Fprintln(w, "| goal | table | this run [95% interval] | verdict |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, gr := range grs {
		cells := []string{gr.Goal, gr.Table, gr.shown(), "**" + gr.verdictText() + "**"}
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "|", "\\|")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// printGoals writes the goals as aligned text.
func printGoals(w io.Writer, grs []goalResult) {
	fmt.Fprintln(w, "\nGoals")
	width := 0
	for _, gr := range grs {
		width = max(width, len([]rune(gr.Goal)))
	}
	for _, gr := range grs {
		fmt.Fprintf(w, "  %s%s  %-32s %s\n", gr.Goal, strings.Repeat(" ", width-len([]rune(gr.Goal))), gr.shown(), gr.verdictText())
	}
}
