//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBrokenSubjectFailsTheRun runs one table with a subject made to fail:
// its row says FAILED with the error in the printed table, in BENCH.md and
// in results.json, the goal that needs it says failed, and the command
// exits 1.
func TestBrokenSubjectFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"-quick", "-only", "mutex-uncontended", "-dur", "10ms", "-reps", "3", "-pin=false",
		"-break", "sync.Mutex", "-out", dir}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	const msg = `FAILED: broken on purpose (-break "sync.Mutex")`
	if !regexp.MustCompile(`(?m)^\s+sync\.Mutex +` + regexp.QuoteMeta(msg)).MatchString(stdout.String()) {
		t.Errorf("printed table lacks the failed row:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), `mutex-uncontended / sync.Mutex failed: broken on purpose`) {
		t.Errorf("stderr does not name the failure: %s", stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "BENCH.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| sync.Mutex | "+msg+" |") {
		t.Error("BENCH.md lacks the failed row")
	}
	if !strings.Contains(string(md), "| **failed (sync.Mutex: broken on purpose") {
		t.Error("the futex goal does not say failed")
	}
	res, err := loadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Tables[0].row("sync.Mutex")
	if r == nil || !strings.Contains(r.Err, "broken on purpose") || len(r.Samples) != 0 {
		t.Fatalf("results.json row: %+v", r)
	}
	if f := res.Tables[0].row("baton local/futex"); f.failed() || len(f.Samples) != 3 {
		t.Errorf("the other subjects were not measured: %+v", f)
	}
}

func TestBreakUnknownSubjectIsAnError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"-quick", "-only", "sem-uncontended", "-dur", "5ms", "-reps", "1", "-pin=false",
		"-break", "no such", "-out", t.TempDir()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `-break: no subject "no such"`) {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}

// A subject that fails after some repetitions is reported as failed, and
// its earlier figures are not compared with anything.
func TestFailureMidwayIsReported(t *testing.T) {
	peer := &subject{name: "peer"}
	flaky := &subject{name: "flaky", baton: true}
	calls := 0
	pt := newPlanned("x", "S", "T", "throughput", "mutex", []string{"peer"}, []*subject{peer, flaky},
		func(ctx context.Context, s *subject) (sample, error) {
			if s == flaky {
				if calls++; calls == 3 {
					return sample{}, errors.New("server went away")
				}
			}
			return sample{Throughput: 100, Ops: 100, Seconds: 1}, nil
		})
	runTable(context.Background(), config{dur: time.Millisecond, reps: 5, maxReps: 5, target: 0.1}, pt)
	r := pt.table.row("flaky")
	if r.Err != "server went away" || len(r.Samples) != 2 || !r.failed() || r.Ratios != nil {
		t.Fatalf("flaky row: err %q, %d samples, ratios %v", r.Err, len(r.Samples), r.Ratios)
	}
	if len(pt.table.row("peer").Samples) != 5 {
		t.Error("the peer stopped with the failed subject")
	}
	var b bytes.Buffer
	printTable(&b, pt.table)
	if !regexp.MustCompile(`\* flaky +FAILED: server went away`).MatchString(b.String()) {
		t.Errorf("table:\n%s", b.String())
	}
}

// runTable stops at the fewest repetitions when the ratios are steady, goes
// on to the most while they are not (and says so), and rotates the order.
func TestRepetitionsFollowTheInterval(t *testing.T) {
	cfg := config{dur: time.Millisecond, reps: 5, maxReps: 5, netReps: 4, netMaxReps: 12, target: 0.10}
	mk := func(spread float64) (*plannedTable, *[]string) {
		rng := rand.New(rand.NewPCG(7, 8))
		var order []string
		subs := []*subject{{name: "peer"}, {name: "baton", baton: true}, {name: "other"}}
		pt := newPlanned("redis-x", "S", "T", "throughput", "mutex", []string{"peer"}, subs,
			func(ctx context.Context, s *subject) (sample, error) {
				order = append(order, s.name)
				return sample{Throughput: 100 * (1 + spread*(rng.Float64()-0.5))}, nil
			})
		pt.network = true
		return pt, &order
	}
	steady, order := mk(0.01)
	runTable(context.Background(), cfg, steady)
	if steady.table.Reps != 4 || steady.table.Note != "" {
		t.Errorf("steady: %d repetitions, note %q; want 4 and none", steady.table.Reps, steady.table.Note)
	}
	// The warm-up repetition, then four, each starting one further along.
	want := "peer baton other | peer baton other | baton other peer | other peer baton | peer baton other"
	got := strings.Join(*order, " ")
	if strings.ReplaceAll(want, " |", "") != got {
		t.Errorf("order %q, want %q", got, want)
	}
	if n := len(steady.table.row("peer").Samples); n != 4 {
		t.Errorf("the warm-up repetition was kept: %d samples", n)
	}
	wild, _ := mk(1.5)
	runTable(context.Background(), cfg, wild)
	if wild.table.Reps != 12 || !strings.Contains(wild.table.Note, "wider than ±10% after 12 repetitions") {
		t.Errorf("noisy: %d repetitions, note %q", wild.table.Reps, wild.table.Note)
	}
}

type countingOp struct {
	n, inFlight, most atomic.Int64
}

func (c *countingOp) op() op {
	take := func(ctx context.Context) error {
		c.n.Add(1)
		v := c.inFlight.Add(1)
		for m := c.most.Load(); v > m && !c.most.CompareAndSwap(m, v); m = c.most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	give := func(ctx context.Context) error { c.inFlight.Add(-1); return nil }
	return op{take, give, func() error { return nil }}
}

func TestWarmUpCyclesEveryHandleThenAllAtOnce(t *testing.T) {
	var shared countingOp // one counter seen by every handle: counts concurrency
	var seq countingOp
	ops := []op{shared.op(), shared.op(), shared.op(), shared.op()}
	if err := warmUp(context.Background(), ops, seq.op()); err != nil {
		t.Fatal(err)
	}
	if shared.n.Load() != 4*3+4 || seq.n.Load() != 3 {
		t.Errorf("%d cycles on the handles, %d on the sequential side; want 16 and 3", shared.n.Load(), seq.n.Load())
	}
	if shared.most.Load() < 2 {
		t.Error("the handles never ran at once")
	}
	bad := op{func(context.Context) error { return errors.New("dial refused") }, nil, nil}
	if err := warmUp(context.Background(), []op{bad}); err == nil || !strings.Contains(err.Error(), "warm-up: dial refused") {
		t.Errorf("warm-up error: %v", err)
	}
}

func TestParseOnly(t *testing.T) {
	sel, err := parseOnly("redis-uncontended, etcd")
	if err != nil {
		t.Fatal(err)
	}
	if !sel.sections["redis"] || !sel.sections["etcd"] || sel.sections["host"] || !sel.tables["redis-uncontended"] {
		t.Errorf("%+v", sel)
	}
	for id, want := range map[string]bool{"redis-uncontended": true, "redis-g4": false, "etcd-g4": true, "cluster-sem": true, "mutex-g4": false} {
		if sel.keeps(id) != want {
			t.Errorf("keeps(%s) = %v", id, !want)
		}
	}
	sel, err = parseOnly("zookeeper,pg-handoff")
	if err != nil {
		t.Fatal(err)
	}
	if !sel.sections["zookeeper"] || !sel.sections["postgres"] || sel.sections["mysql"] {
		t.Errorf("%+v", sel)
	}
	for id, want := range map[string]bool{"zk-g16": true, "pg-handoff": true, "pg-c16": false, "mysql-handoff": false} {
		if sel.keeps(id) != want {
			t.Errorf("keeps(%s) = %v", id, !want)
		}
	}
	if _, err := parseOnly("hots"); err == nil {
		t.Error("a misspelt section was accepted")
	}
}

func TestPinning(t *testing.T) {
	if p := newPinning(false); p.on() || !strings.Contains(p.String(), "off") {
		t.Errorf("without -pin: %v", p)
	}
	t.Setenv("PATH", t.TempDir())
	if p := newPinning(true); p.on() || !strings.Contains(p.String(), "taskset not found") {
		t.Errorf("without taskset: %v", p)
	}
	if cmd := newPinning(true).command("/bin/true", "-x"); strings.Join(cmd.Args, " ") != "/bin/true -x" {
		t.Errorf("unpinned command: %v", cmd.Args)
	}
}

func TestPinClientsMovesAndRestores(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("taskset not installed")
	}
	p := newPinning(true)
	if !p.on() {
		t.Skip(p.String())
	}
	if cmd := p.command("/bin/true"); cmd.Args[0] != p.taskset || cmd.Args[2] != p.server {
		t.Errorf("server command: %v", cmd.Args)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	count := func() int {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			t.Fatal(err)
		}
		return set.Count()
	}
	all, procs := count(), runtime.GOMAXPROCS(0)
	undo, err := p.pinClients()
	if err != nil {
		t.Fatal(err)
	}
	if got := count(); got != p.nclient || runtime.GOMAXPROCS(0) != p.nclient {
		t.Errorf("pinned: %d CPUs, GOMAXPROCS %d; want %d", got, runtime.GOMAXPROCS(0), p.nclient)
	}
	undo()
	if count() != all || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("restored: %d CPUs, GOMAXPROCS %d; want %d and %d", count(), runtime.GOMAXPROCS(0), all, procs)
	}
}

// The results file keeps every field an older reader knows.
func TestResultsKeepTheOldFields(t *testing.T) {
	tb := synthTable("mutex-uncontended", []string{"sync.Mutex"},
		synthRow("sync.Mutex", false, 0, 0, 120, 121, 119),
		synthRow("baton local/futex", true, 0, 0, 100, 101, 99))
	b, err := json.Marshal(tb)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"cost_vs":{"sync.Mutex":1.2`, `"summary":`, `"samples":`, `"ratios":{"sync.Mutex":{"value":1.2`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("results lack %s: %s", k, b)
		}
	}
}

// A server that is not installed fails its section's subjects, in every
// table of the section, and the run: it is never left out in silence.
func TestMissingServerFailsItsSection(t *testing.T) {
	old := zkJar
	zkJar = filepath.Join(t.TempDir(), "zookeeper.jar")
	defer func() { zkJar = old }()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"-quick", "-only", "zookeeper", "-dur", "10ms", "-reps", "1", "-out", dir}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	res, err := loadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tb := range res.Tables {
		ids = append(ids, tb.ID)
		for _, r := range tb.Rows {
			if !strings.Contains(r.Err, "zookeeper.jar not found") {
				t.Errorf("%s / %s: %q, want the missing server", tb.ID, r.Subject, r.Err)
			}
		}
	}
	if want := []string{"zk-uncontended", "zk-g16", "zk-c16", "zk-handoff", "zk-queue-uncontended", "zk-queue-w16"}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("tables %v, want %v", ids, want)
	}
	if !strings.Contains(stderr.String(), "zk-uncontended / baton zklock failed") {
		t.Errorf("stderr does not name the failure: %s", stderr.String())
	}
}

// runRounds runs one repetition of each table in turn, so that a table's
// repetitions are spread over the pass, and each table still gets the
// repetitions it would get alone.
func TestRoundsSpreadRepetitions(t *testing.T) {
	cfg := config{dur: time.Millisecond, reps: 3, maxReps: 3, target: 0.1}
	var order []string
	mk := func(id string) *plannedTable {
		return newPlanned(id, "S", "T", "throughput", "mutex", []string{"peer"},
			[]*subject{{name: "peer"}, {name: "baton", baton: true}},
			func(ctx context.Context, s *subject) (sample, error) {
				if s.name == "peer" {
					order = append(order, id)
				}
				return sample{Throughput: 100, Ops: 100, Seconds: 1}, nil
			})
	}
	a, b := mk("a"), mk("b")
	var finished []string
	wrapped := 0
	runRounds(context.Background(), cfg, []*plannedTable{a, b},
		func(_ *plannedTable, f func()) { wrapped++; f() },
		func(tr *tableRun) { finished = append(finished, tr.t.table.ID) })
	if got := strings.Join(order, ""); got != "ababab" {
		t.Errorf("repetitions ran in the order %q, want ababab", got)
	}
	if a.table.Reps != 3 || b.table.Reps != 3 || len(a.table.row("baton").Samples) != 3 {
		t.Errorf("repetitions: a %d, b %d", a.table.Reps, b.table.Reps)
	}
	if strings.Join(finished, "") != "ab" || wrapped != 8 {
		t.Errorf("finished %v after %d wrapped steps", finished, wrapped)
	}
	if r := a.table.row("baton").Ratios["peer"]; r.Value != 1 {
		t.Errorf("ratio %+v, want 1", r)
	}
}

// A decide table runs past its most repetitions while a goal checked on it
// is undecided, up to decideFactor times as many, and stops as usual when
// its goals are decided.
func TestDecideTableRunsUntilTheGoalIsDecided(t *testing.T) {
	cfg := config{dur: time.Millisecond, reps: 5, maxReps: 5, netReps: 4, netMaxReps: 6, target: 0.10}
	mk := func(ratio, spread float64) *plannedTable {
		rng := rand.New(rand.NewPCG(3, 4))
		subs := []*subject{{name: "raw Redlock 3 nodes"}, {name: "baton redlock 3 nodes", baton: true}}
		pt := newPlanned("redis-uncontended", "S", "T", "throughput", "mutex", []string{"raw Redlock 3 nodes"}, subs,
			func(ctx context.Context, s *subject) (sample, error) {
				v := 100 * (1 + spread*(rng.Float64()-0.5))
				if s.baton {
					v /= ratio
				}
				return sample{Throughput: v}, nil
			})
		pt.network, pt.decide = true, decideFactor
		return pt
	}
	clear := mk(1.0, 0.02)
	runTable(context.Background(), cfg, clear)
	if clear.table.Reps != 4 {
		t.Errorf("a decided goal: %d repetitions, want 4", clear.table.Reps)
	}
	close := mk(1.15, 0.6)
	runTable(context.Background(), cfg, close)
	t.Logf("undecided: %d repetitions", close.table.Reps)
	if close.table.Reps <= 6 || close.table.Reps > 6*decideFactor {
		t.Errorf("an undecided goal: %d repetitions, want more than 6, at most %d", close.table.Reps, 6*decideFactor)
	}
}

// A fixed count of repetitions (-reps, the smoke pass) stays fixed on a
// decide table.
func TestDecideTableKeepsAFixedCount(t *testing.T) {
	cfg := config{dur: time.Millisecond, reps: 3, maxReps: 3, netReps: 3, netMaxReps: 3, target: 0.10}
	rng := rand.New(rand.NewPCG(3, 4))
	subs := []*subject{{name: "raw Redlock 3 nodes"}, {name: "baton redlock 3 nodes", baton: true}}
	pt := newPlanned("redis-uncontended", "S", "T", "throughput", "mutex", []string{"raw Redlock 3 nodes"}, subs,
		func(ctx context.Context, s *subject) (sample, error) {
			v := 100 * (1 + 0.6*(rng.Float64()-0.5))
			if s.baton {
				v /= 1.15
			}
			return sample{Throughput: v}, nil
		})
	pt.network, pt.decide = true, decideFactor
	runTable(context.Background(), cfg, pt)
	if pt.table.Reps != 3 {
		t.Errorf("%d repetitions, want the fixed 3", pt.table.Reps)
	}
}

// Every table a goal is checked on runs until the goal is decided (at most
// goalFactor times its most repetitions; the Redlock table more); others
// stop at their most.
func TestGoalTablesDecide(t *testing.T) {
	he, err := openHostEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer he.close()
	ts := decideGoals(plan(quickConfig, he, &clusterEnv{}, t.TempDir(), map[string]bool{"host": true}))
	var goalTables int
	for _, pt := range ts {
		want := 0
		if hasGoal(pt.table.ID) {
			want = goalFactor
			goalTables++
		}
		if pt.decide != want {
			t.Errorf("%s: decide %d, want %d", pt.table.ID, pt.decide, want)
		}
	}
	if goalTables == 0 {
		t.Fatal("no goal table among the same-host tables")
	}
}

// The server tables (planned by planDB, planDBQueues) are marked alike.
func TestDecideGoalsOnServerTables(t *testing.T) {
	mk := func(id string) *plannedTable { return newPlanned(id, "S", "T", "throughput", "queue", nil, nil, nil) }
	ts := decideGoals([]*plannedTable{mk("pg-queue-w16"), mk("mysql-queue-uncontended"), mk("pg-g4")})
	for i, want := range []int{goalFactor, goalFactor, 0} {
		if ts[i].decide != want {
			t.Errorf("%s: decide %d, want %d", ts[i].table.ID, ts[i].decide, want)
		}
	}
}
