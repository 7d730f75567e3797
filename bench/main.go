//go:build linux

// Command bench measures baton's backends side by side with their peers in
// one run: sync.Mutex, gofrs/flock, raw flock(2) and System V semop(2),
// redsync, bsm/redislock, a raw SET NX + EVAL floor (and its Redlock over
// 3 nodes, and a fair BLPOP line for 16 clients), etcd's concurrency.Mutex, PostgreSQL's and MariaDB's own
// advisory locks, and ZooKeeper's zk.NewLock recipe. Every figure is measured several times, interleaved
// with the peers (A B A B ...), and reported as the median with its range
// and as a ratio to the peer.
//
//	go run . -quick   # a few minutes; prints the ratio tables
//	go run . -full    # everything; writes BENCH.md, results.json, charts/
//	go run . -compare OLD.json NEW.json   # every row's change, regressions flagged
//
// Ratios come with a 95% interval over the paired repetitions, and every performance goal of the project gets a verdict:
// met, not met, or undecided when the interval straddles the goal. A
// subject that fails is reported as failed and the run exits non-zero.
//
// The run starts its own redis-server processes, an embedded etcd and
// throwaway PostgreSQL, MariaDB and ZooKeeper servers on loopback ports, and
// removes every file and System V object it created. A server that is not
// installed fails the subjects of its section, and so the run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	if ok, code := workerMain(); ok {
		os.Exit(code)
	}
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the settings of a pass beyond its size.
type options struct {
	pin pinning
	brk string // subject made to fail, to see failures reported
}

// realMain is the command; it returns the exit code: 0, 1 when a subject
// failed or a regression was flagged, 2 for bad usage.
func realMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "quick pass (a few minutes)")
	full := fs.Bool("full", false, "full pass (every workload, longer runs)")
	out := fs.String("out", "", "directory for BENCH.md, results.json and charts/ (default: . for -full, out-quick for -quick)")
	only := fs.String("only", "", "comma-separated sections (host, redis, etcd, postgres, mysql, zookeeper, memory, scale) or table ids (e.g. redis-uncontended) to run (default all)")
	report := fs.String("report", "", "render BENCH.md and charts/ again from this results.json into -out (default .), without measuring")
	compare := fs.Bool("compare", false, "compare two results files: -compare OLD.json NEW.json")
	tol := fs.Float64("tolerance", 0.05, "with -compare: smallest change flagged, as a fraction, when its interval excludes no change")
	dur := fs.Duration("dur", 0, "length of one measured run (default: the pass's)")
	reps := fs.Int("reps", 0, "repetitions of every table, fixed (default: the pass's, more for network tables while intervals are wide)")
	pin := fs.Bool("pin", false, "pin redis-server and, during Redis tables, the clients to separate CPUs with taskset (2 CPUs or more)")
	brk := fs.String("break", "", "make the named subject fail (to check how failures are reported)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *compare {
		if fs.NArg() != 2 {
			fmt.Fprintln(stderr, "bench: -compare takes two files: OLD.json NEW.json")
			return 2
		}
		return compareFiles(fs.Arg(0), fs.Arg(1), *tol, stdout, stderr)
	}
	if *report != "" {
		if err := rerender(*report, *out); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	if *quick == *full {
		fmt.Fprintln(stderr, "bench: give exactly one of -quick or -full (or -compare OLD.json NEW.json)")
		return 2
	}
	sel, err := parseOnly(*only)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	cfg, mode := quickConfig, "quick"
	if *full {
		cfg, mode = fullConfig, "full"
	}
	if *dur > 0 {
		cfg.dur = *dur
	}
	if *reps > 0 {
		cfg.reps, cfg.maxReps, cfg.netReps, cfg.netMaxReps = *reps, *reps, *reps, *reps
	}
	if *out == "" {
		*out = "out-quick"
		if *full {
			*out = "."
		}
	}
	cmd := "cd bench && go run . " + strings.Join(args, " ")
	res, err := run(context.Background(), cfg, mode, sel, cmd, stdout, options{pin: newPinning(*pin), brk: *brk})
	code := 0
	if err != nil {
		fmt.Fprintln(stderr, "bench: FAILED:", err)
		code = 1
	}
	if res != nil {
		if werr := writeOutputs(res, *out, true); werr != nil {
			fmt.Fprintln(stderr, "bench:", werr)
			return 1
		}
		fmt.Fprintf(stdout, "\nwrote %s, %s and %s\n", filepath.Join(*out, "BENCH.md"), filepath.Join(*out, "results.json"), filepath.Join(*out, "charts"))
	}
	return code
}

func loadResults(path string) (*results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &res, nil
}

// rerender writes the report of a results file again, with the ratios,
// intervals and goals computed anew from its samples; the results file
// itself is rewritten only into another directory.
func rerender(path, out string) error {
	res, err := loadResults(path)
	if err != nil {
		return err
	}
	for _, t := range res.Tables {
		prepared(t)
	}
	res.Goals = checkGoals(res)
	if out == "" {
		out = "."
	}
	src, _ := filepath.Abs(path)
	dst, _ := filepath.Abs(filepath.Join(out, "results.json"))
	return writeOutputs(res, out, src != dst)
}

// selection is what -only asked for: whole sections, or single tables.
// sections are those to set up (the whole ones and those of the single
// tables).
type selection struct {
	sections map[string]bool
	whole    map[string]bool
	tables   map[string]bool
}

// keeps reports whether the table id is selected.
func (sel selection) keeps(id string) bool {
	if sel.tables[id] {
		return true
	}
	for _, s := range sectionsOf(id) {
		if sel.whole[s] {
			return true
		}
	}
	return false
}

var sectionNames = []string{"host", "redis", "etcd", "postgres", "mysql", "zookeeper", "memory", "scale"}

// sectionsOf names the sections a table id belongs to.
func sectionsOf(id string) []string {
	switch {
	case strings.HasPrefix(id, "mutex-"), strings.HasPrefix(id, "rw-"), strings.HasPrefix(id, "sem-"),
		strings.HasPrefix(id, "idle-"), strings.HasPrefix(id, "open-"), id == "residue", strings.HasPrefix(id, "chan-"), strings.HasPrefix(id, "queue-"),
		strings.HasPrefix(id, "rate-"):
		return []string{"host"}
	case strings.HasPrefix(id, "redis-"):
		return []string{"redis"}
	case strings.HasPrefix(id, "etcd-"):
		return []string{"etcd"}
	case strings.HasPrefix(id, "cluster-"):
		return []string{"redis", "etcd"}
	case strings.HasPrefix(id, "mem-"):
		return []string{"memory"}
	case strings.HasPrefix(id, "scale-"):
		return []string{"scale"}
	}
	for _, sec := range dbSections {
		if strings.HasPrefix(id, sec.prefix) {
			return []string{sec.name}
		}
	}
	return nil
}

func parseOnly(only string) (selection, error) {
	sel := selection{sections: map[string]bool{}, whole: map[string]bool{}, tables: map[string]bool{}}
	if only == "" {
		for _, s := range sectionNames {
			sel.sections[s], sel.whole[s] = true, true
		}
		return sel, nil
	}
	for _, s := range strings.Split(only, ",") {
		s = strings.TrimSpace(s)
		switch secs := sectionsOf(s); {
		case slices.Contains(sectionNames, s):
			sel.sections[s], sel.whole[s] = true, true
		case secs != nil:
			sel.tables[s] = true
			for _, sec := range secs {
				sel.sections[sec] = true
			}
		default:
			return sel, fmt.Errorf("-only: %q is neither a section (%s) nor a table id", s, strings.Join(sectionNames, ", "))
		}
	}
	return sel, nil
}

// run performs a pass and returns every table, also when a part failed
// (the error says which).
func run(ctx context.Context, cfg config, mode string, sel selection, cmd string, log io.Writer, opt options) (*results, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) }
	res := &results{Mode: mode, Command: cmd, Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Config: cfgJSON(cfg)}
	res.Machine["pinning"] = opt.pin.String()
	want := sel.sections
	var errs []error

	dir, err := os.MkdirTemp(tmpBase(), "baton-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	he, err := openHostEnv(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := he.close(); err != nil {
			logf("closing same-host backends: %v", err)
		}
		if err := removeHostObjects(dir); err != nil {
			logf("removing System V objects: %v", err)
		}
	}()

	var ce *clusterEnv
	if want["redis"] || want["etcd"] || want["memory"] {
		ce, err = openClusterEnv(ctx, cfg.poll, want["redis"] || want["memory"], want["etcd"] || want["memory"], opt.pin, logf)
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster servers: %w", err))
			ce = &clusterEnv{}
		}
		defer ce.close()
	} else {
		ce = &clusterEnv{}
	}
	de := openDBEnv(ctx, want, logf)
	defer de.close()
	se := &scaleEnv{}
	if want["scale"] {
		if se, err = openScaleEnv(ctx, opt.pin, logf); err != nil {
			errs = append(errs, fmt.Errorf("scale servers: %w", err))
			se = &scaleEnv{}
		}
		defer se.close()
	}
	var re *replicaEnv
	if want["scale"] {
		if re, err = openReplicaEnv(ctx, opt.pin, logf); err != nil {
			errs = append(errs, fmt.Errorf("replica servers: %w", err))
			re = nil
		} else {
			defer re.close()
		}
	}
	logf("CPU pinning: %s", opt.pin)

	tables := append(plan(cfg, he, ce, dir, want), planDB(cfg, de, he, want)...)
	tables = append(tables, planDBQueues(ctx, cfg, de, ce, want)...)
	tables = append(tables, planScale(cfg, se)...)
	tables = append(tables, planReplicas(cfg, re)...)
	decideGoals(tables)
	var keep []*plannedTable
	for _, t := range tables {
		if sel.keeps(t.table.ID) {
			keep = append(keep, t)
		}
	}
	for id := range sel.tables {
		if !slices.ContainsFunc(keep, func(t *plannedTable) bool { return t.table.ID == id }) {
			errs = append(errs, fmt.Errorf("-only: no table %q in this pass", id))
		}
	}
	tables = keep
	if opt.brk != "" {
		errs = append(errs, breakSubject(tables, opt.brk)...)
	}
	wrap := func(t *plannedTable, f func()) {
		unpin := func() {}
		if t.pin {
			var err error
			if unpin, err = opt.pin.pinClients(); err != nil {
				logf("CPU pinning failed, %s runs unpinned: %v", t.table.ID, err)
			}
		}
		f()
		unpin()
	}
	runRounds(ctx, cfg, tables, wrap, func(tr *tableRun) {
		t := tr.t
		printTable(log, t.table)
		logf("  (%s, %d repetitions)", tr.spent.Round(time.Millisecond), t.table.Reps)
		for _, r := range t.table.Rows {
			switch {
			case r.Err != "":
				errs = append(errs, fmt.Errorf("%s / %s failed: %s", t.table.ID, r.Subject, r.Err))
			case len(r.Samples) == 0:
				errs = append(errs, fmt.Errorf("%s / %s: no result", t.table.ID, r.Subject))
			}
		}
	})
	for _, t := range tables {
		res.Tables = append(res.Tables, t.table)
	}
	res.Goals = checkGoals(res)
	printGoals(log, res.Goals)
	printNoise(log, res)
	return res, errors.Join(errs...)
}

// breakSubject makes every run of the subject named name fail.
func breakSubject(tables []*plannedTable, name string) []error {
	found := false
	for _, t := range tables {
		orig := t.run
		t.run = func(ctx context.Context, s *subject) (sample, error) {
			if s.name == name {
				return sample{}, fmt.Errorf("broken on purpose (-break %q)", name)
			}
			return orig(ctx, s)
		}
		for _, s := range t.subjects {
			found = found || s.name == name
		}
	}
	if !found {
		return []error{fmt.Errorf("-break: no subject %q in this pass", name)}
	}
	return nil
}

// tmpBase prefers tmpfs, where the namespace of same-host primitives lives
// by default.
func tmpBase() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// tableRun is a table being filled, one repetition at a time.
type tableRun struct {
	t      *plannedTable
	cfg    config
	rep    int
	lo, hi int
	warmed bool
	spent  time.Duration
}

func newTableRun(cfg config, t *plannedTable) *tableRun {
	lo, hi := t.reps(cfg)
	return &tableRun{t: t, cfg: cfg, lo: lo, hi: hi}
}

// once runs every subject of the table once, starting one further along
// the list each repetition, so that no subject always follows the same one.
func (tr *tableRun) once(ctx context.Context, rep int, keep bool) {
	rows := tr.t.table.Rows
	n := len(tr.t.subjects)
	for j := range n {
		i := (j + rep) % n
		r := rows[i]
		if r.Err != "" {
			continue
		}
		smp, err := runGuarded(ctx, tr.cfg, tr.t, tr.t.subjects[i])
		switch {
		case err != nil && !keep:
			r.Err = "warm-up: " + err.Error()
		case err != nil:
			r.Err = err.Error()
		case keep:
			r.Samples = append(r.Samples, smp)
		}
	}
}

// step runs the table's next repetition and reports whether it ran one:
// false once the table has its most repetitions, or at least its fewest
// and every ratio of a baton row to a peer within ±cfg.target; a decide
// table goes on past that while one of its goals is undecided. A network
// table first runs one repetition that is thrown away.
func (tr *tableRun) step(ctx context.Context) bool {
	t0 := time.Now()
	defer func() { tr.spent += time.Since(t0) }()
	if tr.t.network && !tr.warmed {
		tr.once(ctx, 0, false)
		tr.warmed = true
	}
	decide := tr.t.decide > 1 && tr.hi > tr.lo // a fixed count stays fixed
	most := tr.hi
	if decide {
		most *= tr.t.decide
	}
	if tr.rep >= most {
		return false
	}
	if tr.rep >= tr.lo {
		finishTable(tr.t.table)
		if (tr.rep >= tr.hi || settled(tr.t.table, tr.cfg.target)) && !(decide && undecided(tr.t.table)) {
			return false
		}
	}
	tr.once(ctx, tr.rep, true)
	tr.rep++
	return true
}

func (tr *tableRun) finish() {
	t := tr.t
	if t.done != nil {
		t.done()
	}
	finishTable(t.table)
	t.table.Reps = tr.rep
	if tr.hi > tr.lo && !settled(t.table, tr.cfg.target) {
		t.table.Note = fmt.Sprintf("some intervals are wider than ±%.0f%% after %d repetitions", tr.cfg.target*100, tr.rep)
	}
}

// runTable fills one table, its repetitions in a row.
func runTable(ctx context.Context, cfg config, t *plannedTable) {
	tr := newTableRun(cfg, t)
	for tr.step(ctx) {
	}
	tr.finish()
}

// runRounds fills the tables in rounds: each round runs one repetition of
// every table still short of its repetitions, so that a table's
// repetitions are spread over the whole pass. A slow or fast phase of the
// machine then falls on every table, in every run alike, and widens the
// intervals instead of moving one table's medians. wrap surrounds each
// repetition (CPU pinning); done is told of each table once it is filled.
func runRounds(ctx context.Context, cfg config, tables []*plannedTable, wrap func(*plannedTable, func()), done func(*tableRun)) {
	var active []*tableRun
	for _, t := range tables {
		active = append(active, newTableRun(cfg, t))
	}
	for len(active) > 0 {
		var next []*tableRun
		for _, tr := range active {
			ran := false
			wrap(tr.t, func() { ran = tr.step(ctx) })
			if ran {
				next = append(next, tr)
				continue
			}
			tr.finish()
			done(tr)
		}
		active = next
	}
}

// settled reports whether every ratio of a baton row to a peer of t has an
// interval within ±target.
func settled(t *table, target float64) bool {
	for _, r := range t.Rows {
		if !r.Baton || r.failed() {
			continue
		}
		for _, ref := range t.Refs {
			rr := t.row(ref)
			if rr == nil || rr.Baton || rr.failed() {
				continue
			}
			if !r.Ratios[ref].within(target) {
				return false
			}
		}
	}
	return true
}

// runGuarded bounds one run: a subject that hangs is reported, not waited
// for forever.
func runGuarded(ctx context.Context, cfg config, t *plannedTable, s *subject) (sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		s   sample
		err error
	}
	done := make(chan result, 1)
	go func() {
		smp, err := t.run(ctx, s)
		done <- result{smp, err}
	}()
	limit := 20*cfg.dur + 60*time.Second + t.extra
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(limit):
		return sample{}, fmt.Errorf("no result within %s", limit)
	}
}
