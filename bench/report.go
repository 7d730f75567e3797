//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// results is everything a pass measured; results.json is this, verbatim.
type results struct {
	Mode    string            `json:"mode"`
	Command string            `json:"command"`
	Date    string            `json:"date"`
	Machine map[string]string `json:"machine"`
	Config  map[string]any    `json:"config"`
	Tables  []*table          `json:"tables"`
	// Goals is the verdict on every performance goal (goals.go).
	Goals []goalResult `json:"goals,omitempty"`
}

// table is one workload: every subject measured in it.
type table struct {
	ID      string   `json:"id"`
	Section string   `json:"section"`
	Title   string   `json:"title"`
	Metric  string   `json:"metric"` // throughput, latency or memory
	Refs    []string `json:"refs"`
	Rows    []*row   `json:"rows"`
	// Reps is the number of repetitions run; Note says when the intervals
	// stayed wider than the target after the most repetitions allowed.
	Reps int    `json:"repetitions,omitempty"`
	Note string `json:"note,omitempty"`
}

// row is one subject in one table.
type row struct {
	Subject string             `json:"subject"`
	Baton   bool               `json:"baton"`
	Samples []sample           `json:"samples"`
	Err     string             `json:"error,omitempty"`
	Summary map[string]summary `json:"summary,omitempty"`
	// Cost is this row's median cost divided by the reference's: time
	// per operation (throughput tables), median latency (latency tables)
	// or bytes (memory tables). Below 1 is better than the reference.
	Cost map[string]float64 `json:"cost_vs,omitempty"`
	// Ratios is Cost with its 95% interval over the paired repetitions
	// (the reference's run in the same repetition; see pairedStat).
	Ratios map[string]interval `json:"ratios,omitempty"`
	// TwinOf names the subject this row measures a second time, in the
	// same repetitions: its ratio to it is the machine's own noise.
	TwinOf string `json:"twin_of,omitempty"`
}

// failed reports whether the row's subject failed (or gave no result);
// its figures, if any, come from the repetitions before the failure and
// are not compared. A row read from a file may carry its summary alone.
func (r *row) failed() bool { return r.Err != "" || (len(r.Samples) == 0 && r.Summary == nil) }

var figures = []struct {
	name string
	get  func(sample) float64
}{
	{"throughput", func(s sample) float64 { return s.Throughput }},
	{"p50", func(s sample) float64 { return float64(s.P50) }},
	{"p99", func(s sample) float64 { return float64(s.P99) }},
	{"max", func(s sample) float64 { return float64(s.Max) }},
	{"worst_wait", func(s sample) float64 { return float64(s.WorstWait) }},
	{"cpu_per_op", func(s sample) float64 { return float64(s.CPUPerOp) }},
	{"fairness", func(s sample) float64 { return s.Fairness }},
	{"bytes", func(s sample) float64 { return float64(s.Bytes) }},
	{"left", func(s sample) float64 { return float64(s.Left) }},
	{"left_after_wait", func(s sample) float64 { return float64(s.LeftAfterWait) }},
	{"seconds", func(s sample) float64 { return s.Seconds }},
}

// netResidue reports whether t is the residue table of a network backend
// (objects left, a wait, server memory).
func (t *table) netResidue() bool { return t.Metric == "memory" && strings.HasSuffix(t.ID, "-residue") }

// cost is the figure ratios compare: lower is better.
func (t *table) cost(r *row) float64 {
	s, ok := r.Summary["throughput"]
	switch t.Metric {
	case "throughput":
		if !ok || s.Median == 0 {
			return math.NaN()
		}
		return 1 / s.Median
	case "latency":
		return r.Summary["p50"].Median
	default:
		return r.Summary["bytes"].Median
	}
}

// costOf is the figure of one sample that ratios compare: lower is better.
func costOf(metric string, s sample) float64 {
	switch metric {
	case "throughput":
		if s.Throughput <= 0 {
			return math.NaN()
		}
		return 1 / s.Throughput
	case "latency":
		return float64(s.P50)
	default:
		return float64(s.Bytes)
	}
}

func (t *table) costs(r *row) []float64 {
	v := make([]float64, len(r.Samples))
	for i, s := range r.Samples {
		v[i] = costOf(t.Metric, s)
	}
	return v
}

// ratio is row r's cost over row ref's, paired by repetition.
func (t *table) ratio(r, ref *row) interval {
	return ratioCI(t.ID+"/"+r.Subject+"/"+ref.Subject, t.costs(r), t.costs(ref))
}

// finishTable computes the summaries and ratios of t from its samples; it
// can run again on a table read from a results file.
func finishTable(t *table) {
	for _, r := range t.Rows {
		r.Summary, r.Cost, r.Ratios = nil, nil, nil
		if len(r.Samples) == 0 {
			continue
		}
		r.Summary = map[string]summary{}
		for _, f := range figures {
			vals := make([]float64, len(r.Samples))
			for i, s := range r.Samples {
				vals[i] = f.get(s)
			}
			r.Summary[f.name] = summarize(vals)
		}
	}
	for _, r := range t.Rows {
		if r.failed() {
			continue
		}
		refs := t.Refs
		if r.TwinOf != "" {
			refs = append(slices.Clone(refs), r.TwinOf)
		}
		for _, ref := range refs {
			rr := t.row(ref)
			if rr == nil || rr.failed() || rr == r {
				continue
			}
			c, rc := t.cost(r), t.cost(rr)
			if rc > 0 && !math.IsNaN(c) && !math.IsNaN(rc) {
				if r.Cost == nil {
					r.Cost = map[string]float64{}
					r.Ratios = map[string]interval{}
				}
				iv := t.ratio(r, rr)
				r.Cost[ref], r.Ratios[ref] = c/rc, iv
				if !math.IsNaN(iv.Value) {
					r.Cost[ref] = iv.Value // one figure of the ratio, the interval's
				}
			}
		}
	}
}

func (t *table) row(subject string) *row {
	for _, r := range t.Rows {
		if r.Subject == subject {
			return r
		}
	}
	return nil
}

func fmtDur(ns float64) string {
	switch {
	case ns == 0:
		return "0"
	case ns < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	default:
		return fmt.Sprintf("%.3g s", ns/1e9)
	}
}

func fmtRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func fmtBytes(v float64) string {
	switch {
	case math.Abs(v) >= 1<<20:
		return fmt.Sprintf("%.3g MiB", v/(1<<20))
	case math.Abs(v) >= 1<<10:
		return fmt.Sprintf("%.3g KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// fmtX prints a ratio with the precision its size needs.
func fmtX(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "?"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.1 || a == 0:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

// fmtRatio prints a ratio with its interval: 1.19× [1.05–1.31].
func fmtRatio(iv interval) string {
	if !iv.known() {
		return fmtX(iv.Value) + "×"
	}
	return fmt.Sprintf("%s× [%s–%s]", fmtX(iv.Value), fmtX(iv.Lo), fmtX(iv.Hi))
}

func withRange(s summary, f func(float64) string) string {
	return fmt.Sprintf("%s [%s–%s]", f(s.Median), f(s.Min), f(s.Max))
}

// columns returns the header and the cells of every row of t.
func (t *table) columns() ([]string, [][]string) {
	var head []string
	switch t.Metric {
	case "throughput":
		head = []string{"subject", "ops/s median [min–max]", "p50", "p99", "max", "worst wait", "CPU/op", "fairness"}
	case "latency":
		head = []string{"subject", "p50 median [min–max]", "p99", "max"}
	case "memory":
		if t.netResidue() {
			head = []string{"subject", "left right after", "left after the wait", "wait", "server memory growth"}
			break
		}
		fallthrough
	default:
		head = []string{"subject", "bytes median [min–max]"}
	}
	for _, ref := range t.Refs {
		if t.row(ref) != nil {
			head = append(head, "cost vs "+ref)
		}
	}
	var cells [][]string
	for _, r := range t.Rows {
		name := r.Subject
		if r.Baton {
			name = "**" + name + "**"
		}
		c := []string{name}
		if r.failed() {
			msg := "FAILED: no result"
			if r.Err != "" {
				msg = "FAILED: " + r.Err
			}
			c = append(c, msg)
			for len(c) < len(head) {
				c = append(c, "")
			}
			cells = append(cells, c)
			continue
		}
		m := func(k string) float64 { return r.Summary[k].Median }
		switch t.Metric {
		case "throughput":
			fair := "—"
			if m("fairness") > 0 {
				fair = fmt.Sprintf("%.2f", m("fairness"))
			}
			c = append(c, withRange(r.Summary["throughput"], fmtRate), fmtDur(m("p50")), fmtDur(m("p99")), fmtDur(m("max")),
				fmtDur(m("worst_wait")), fmtDur(m("cpu_per_op")), fair)
		case "latency":
			c = append(c, withRange(r.Summary["p50"], fmtDur), fmtDur(m("p99")), fmtDur(m("max")))
		default:
			if t.netResidue() {
				mem := "not reported"
				if m("bytes") >= 0 {
					mem = withRange(r.Summary["bytes"], fmtBytes)
				}
				count := func(k string) string {
					return withRange(r.Summary[k], func(v float64) string { return fmt.Sprintf("%.0f", v) })
				}
				c = append(c, count("left"), count("left_after_wait"), fmtDur(m("seconds")*1e9), mem)
				break
			}
			c = append(c, withRange(r.Summary["bytes"], fmtBytes))
		}
		for _, ref := range t.Refs {
			if t.row(ref) == nil {
				continue
			}
			if v, ok := r.Ratios[ref]; ok {
				c = append(c, fmtRatio(v))
			} else if r.Subject == ref {
				c = append(c, "1")
			} else {
				c = append(c, "—")
			}
		}
		cells = append(cells, c)
	}
	return head, cells
}

// printTable writes t as aligned text.
func printTable(w io.Writer, t *table) {
	head, cells := t.columns()
	width := make([]int, len(head))
	all := append([][]string{head}, cells...)
	for _, c := range all {
		for i, s := range c {
			if i < len(width) {
				width[i] = max(width[i], len([]rune(strings.Trim(s, "*"))))
			}
		}
	}
	fmt.Fprintf(w, "\n%s — %s\n", t.Section, t.Title)
	for _, c := range all {
		var b strings.Builder
		for i, s := range c {
			if i >= len(width) {
				break
			}
			s = strings.Trim(s, "*")
			if i == 0 && len(c) > 0 && c[0] != head[0] && strings.HasPrefix(c[0], "**") {
				s = "* " + s
			} else if i == 0 {
				s = "  " + s
			}
			b.WriteString(s)
			b.WriteString(strings.Repeat(" ", max(0, width[i]+2-len([]rune(s))+boolInt(i == 0)*2)))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func machine() map[string]string {
	m := map[string]string{"nproc": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version(), "goarch": runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == "MemTotal" {
				m["memory"] = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m["kernel"] = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		m["redis"] = strings.TrimSpace(string(out))
	}
	return m
}

func cfgJSON(c config) map[string]any {
	return map[string]any{
		"run": c.dur.String(), "repetitions": c.reps, "max_repetitions": c.maxReps,
		"network_repetitions": c.netReps, "network_max_repetitions": c.netMaxReps, "interval_target": c.target,
		"semaphore_processes": c.semPs, "goroutines": c.gs, "processes": c.ps,
		"permits": c.permits, "rw_goroutines": c.rwG, "handoffs_per_run": c.handoffs,
		"kills_per_run": c.kills, "memory_handles": c.memK, "peer_retry_delay": c.poll.String(),
	}
}

// writeOutputs writes BENCH.md and the charts into dir, and results.json
// with withJSON.
func writeOutputs(res *results, dir string, withJSON bool) error {
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		return err
	}
	if withJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	for _, t := range res.Tables {
		svg := chartSVG(t)
		if svg == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "charts", t.ID+".svg"), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "BENCH.md"), []byte(markdown(res)), 0o644)
}
