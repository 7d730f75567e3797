//go:build linux

package main

import (
	"slices"
	"strings"
	"testing"
)

// synthRow is a row whose repetitions ran at the given throughputs, with
// the given fairness and worst wait in every repetition.
func synthRow(subject string, baton bool, fair float64, wait int64, thr ...float64) *row {
	r := &row{Subject: subject, Baton: baton}
	for _, v := range thr {
		r.Samples = append(r.Samples, sample{Throughput: v, Ops: int64(v), Seconds: 1, Fairness: fair, WorstWait: wait, P50: int64(1e9 / v)})
	}
	return r
}

func synthTable(id string, refs []string, rows ...*row) *table {
	t := &table{ID: id, Section: "S", Title: "T " + id, Metric: "throughput", Refs: refs, Rows: rows}
	finishTable(t)
	return t
}

func goalOf(t *testing.T, grs []goalResult, name string) goalResult {
	t.Helper()
	for _, g := range grs {
		if strings.HasPrefix(g.Goal, name) {
			return g
		}
	}
	t.Fatalf("no goal %q", name)
	return goalResult{}
}

func TestGoalsVerdicts(t *testing.T) {
	res := &results{Tables: []*table{
		// futex at 1.2× sync.Mutex's cost, steady: met.
		synthTable("mutex-uncontended", []string{"sync.Mutex"},
			synthRow("sync.Mutex", false, 0, 0, 120, 121, 119, 120, 122),
			synthRow("baton local/futex", true, 0, 0, 100, 101, 99, 100, 101)),
		// baton redis 2× the cost of the floor: not met.
		synthTable("redis-uncontended", []string{"raw SET NX + EVAL", "raw Redlock 3 nodes"},
			synthRow("raw SET NX + EVAL", false, 0, 0, 100, 100, 101, 99, 100),
			synthRow("baton redis", true, 0, 0, 50, 50, 51, 49, 50),
			synthRow("raw Redlock 3 nodes", false, 0, 0, 50, 50, 50, 50, 50),
			&row{Subject: "baton redlock 3 nodes", Baton: true, Err: "no majority"}),
		// 16 clients: 2.5× bsm, 4× redsync; fairness straddles 0.9.
		synthTable("redis-c16", []string{"redsync", "bsm/redislock"},
			synthRow("redsync", false, 0.2, 0, 25, 25, 26, 24, 25),
			synthRow("bsm/redislock", false, 0.1, 0, 40, 40, 41, 39, 40),
			func() *row {
				r := synthRow("baton redis", true, 0, 0, 100, 100, 101, 99, 100)
				for i, f := range []float64{0.85, 0.95, 0.88, 0.93, 0.9} {
					r.Samples[i].Fairness = f
				}
				finishTable(&table{Rows: []*row{r}})
				return r
			}()),
		synthTable("sem-p4", []string{"raw semop"},
			synthRow("raw semop", false, 0.5, 2e6, 10, 10, 10, 10, 10),
			synthRow("baton local/shm", true, 0.9, 4e6, 150, 160, 170, 150, 160)),
		// Handoff medians of 1 ms (met) and 4 ms (not met) against 2 ms.
		synthTable("pg-handoff", nil, synthRow("baton pglock", true, 0, 9e6, 1000, 1000, 1000)),
		synthTable("mysql-handoff", nil, synthRow("baton mysqllock", true, 0, 1e6, 250, 250, 250)),
	}}
	grs := checkGoals(res)
	if g := goalOf(t, grs, "futex Mutex"); g.Verdict != verdictMet || g.Measured.Value < 1.19 || g.Measured.Value > 1.21 {
		t.Errorf("futex: %+v", g)
	}
	if g := goalOf(t, grs, "Redis, uncontended"); g.Verdict != verdictNotMet || g.Measured.Value != 2 {
		t.Errorf("redis: %+v", g)
	}
	if g := goalOf(t, grs, "Redlock"); g.Verdict != "failed" || !strings.Contains(g.Why, "no majority") {
		t.Errorf("redlock with a failed subject: %+v", g)
	}
	if g := goalOf(t, grs, "Redis, 16 clients on one name: throughput"); g.Verdict != verdictMet || g.Best != "bsm/redislock" || g.Measured.Value != 2.5 {
		t.Errorf("speedup over the best peer: %+v", g)
	}
	if g := goalOf(t, grs, "Redis, 16 clients on one name: fairness"); g.Verdict != verdictUndecided || g.Measured.Value != 0.9 {
		t.Errorf("fairness straddling the goal: %+v", g)
	}
	// 15× to 17× the floor against a goal of 20×: all of it below.
	if g := goalOf(t, grs, "Semaphore, capacity 1, 4 processes: throughput"); g.Verdict != verdictNotMet || g.Measured.Value != 16 {
		t.Errorf("sem-p4 speedup: %+v", g)
	}
	if g := goalOf(t, grs, "Semaphore, capacity 1, 4 processes: worst wait"); g.Verdict != verdictMet || g.Measured.Value != 4e6 {
		t.Errorf("worst wait: %+v", g)
	}
	if g := goalOf(t, grs, "PostgreSQL, handoff"); g.Verdict != verdictMet || g.Measured.Value != 1e6 {
		t.Errorf("median handoff under the goal: %+v", g)
	}
	if g := goalOf(t, grs, "MariaDB, handoff"); g.Verdict != verdictNotMet || g.Measured.Value != 4e6 {
		t.Errorf("median handoff over the goal (its worst wait is not what counts): %+v", g)
	}
	if g := goalOf(t, grs, "etcd, uncontended"); g.Verdict != "not measured" {
		t.Errorf("a goal without its table: %+v", g)
	}
	if len(grs) != len(goals) {
		t.Errorf("%d results for %d goals", len(grs), len(goals))
	}

	res.Goals = grs
	res.Machine, res.Config = map[string]string{}, map[string]any{"peer_retry_delay": "10ms"}
	md := markdown(res)
	goalsAt, tablesAt := strings.Index(md, "## Goals"), strings.Index(md, "### T mutex-uncontended")
	if goalsAt < 0 || tablesAt < 0 || goalsAt > tablesAt {
		t.Fatalf("the goals table is not at the top of BENCH.md (at %d, tables at %d)", goalsAt, tablesAt)
	}
	for _, line := range []string{
		"| futex Mutex, uncontended Lock+Unlock ≤ 1.5× sync.Mutex | mutex-uncontended | 1.20× [",
		"| Redis, 16 clients on one name: throughput ≥ 1.2× the best peer | redis-c16 | 2.50× [",
		"| **failed (baton redlock 3 nodes: no majority)** |",
		"| **not measured (table not in this run)** |",
		"| Semaphore, capacity 1, 4 processes: worst wait ≤ 10 ms | sem-p4 | 4 ms [4 ms–4 ms] | **met** |",
		"| PostgreSQL, handoff to another client ≤ 2 ms median | pg-handoff | 1 ms",
	} {
		if !strings.Contains(md, line) {
			t.Errorf("BENCH.md lacks %q", line)
		}
	}
	if !strings.Contains(md, "| **baton redlock 3 nodes** | FAILED: no majority |") {
		t.Error("the failed row is not shown as FAILED with its error")
	}
}

// The residue goal judges the bytes left, at most its bound.
func TestResidueGoalJudgesBytes(t *testing.T) {
	for _, c := range []struct {
		bytes   int64
		verdict string
	}{{0, "met"}, {64, "met"}, {640_000, "not met"}} {
		r := &row{Subject: "baton local/futex", Baton: true}
		for range 5 {
			r.Samples = append(r.Samples, sample{Ops: 100_000, Bytes: c.bytes})
		}
		tb := &table{ID: "residue", Section: "S", Title: "T residue", Metric: "memory", Rows: []*row{r}}
		finishTable(tb)
		g := goalOf(t, checkGoals(&results{Tables: []*table{tb}}), "futex Mutex, files left")
		if g.Verdict != c.verdict {
			t.Errorf("%d bytes left: %s (%s), want %s", c.bytes, g.Verdict, g.shown(), c.verdict)
		}
	}
}

// A network backend's residue goal judges the objects left after the wait,
// at most its bound, whatever was there right after; the table shows both
// and the server memory, or that the server reports none.
func TestNetResidueGoalJudgesObjectsLeft(t *testing.T) {
	for _, c := range []struct {
		left    int64
		verdict string
	}{{0, "met"}, {3, "met"}, {2000, "not met"}} {
		r := &row{Subject: "baton mysqllock", Baton: true}
		for range 5 {
			r.Samples = append(r.Samples, sample{Ops: 2000, Left: 2000, LeftAfterWait: c.left, Seconds: 12.5, Bytes: -1})
		}
		tb := &table{ID: "mysql-residue", Section: "S", Title: "T", Metric: "memory", Rows: []*row{r}}
		finishTable(tb)
		g := goalOf(t, checkGoals(&results{Tables: []*table{tb}}), "MariaDB, rows left")
		if g.Verdict != c.verdict {
			t.Errorf("%d rows left: %s (%s), want %s", c.left, g.Verdict, g.shown(), c.verdict)
		}
		head, cells := tb.columns()
		if want := []string{"subject", "left right after", "left after the wait", "wait", "server memory growth"}; !slices.Equal(head, want) {
			t.Fatalf("head %q, want %q", head, want)
		}
		if cells[0][1] != "2000 [2000–2000]" || cells[0][4] != "not reported" {
			t.Errorf("cells %q", cells[0])
		}
	}
}
