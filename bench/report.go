//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
}

// table is one workload: every subject measured in it.
type table struct {
	ID      string   `json:"id"`
	Section string   `json:"section"`
	Title   string   `json:"title"`
	Metric  string   `json:"metric"` // throughput, latency or memory
	Refs    []string `json:"refs"`
	Rows    []*row   `json:"rows"`
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
}

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
}

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

func finishTable(t *table) {
	for _, r := range t.Rows {
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
		if r.Summary == nil {
			continue
		}
		for _, ref := range t.Refs {
			rr := t.row(ref)
			if rr == nil || rr.Summary == nil || rr == r {
				continue
			}
			c, rc := t.cost(r), t.cost(rr)
			if rc > 0 && !math.IsNaN(c) && !math.IsNaN(rc) {
				if r.Cost == nil {
					r.Cost = map[string]float64{}
				}
				r.Cost[ref] = c / rc
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
		if r.Summary == nil {
			msg := "no result"
			if r.Err != "" {
				msg = "error: " + r.Err
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
			c = append(c, withRange(r.Summary["bytes"], fmtBytes))
		}
		for _, ref := range t.Refs {
			if t.row(ref) == nil {
				continue
			}
			if v, ok := r.Cost[ref]; ok {
				c = append(c, fmt.Sprintf("%.2f×", v))
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
		"run": c.dur.String(), "repetitions": c.reps, "goroutines": c.gs, "processes": c.ps,
		"permits": c.permits, "rw_goroutines": c.rwG, "handoffs_per_run": c.handoffs,
		"kills_per_run": c.kills, "memory_handles": c.memK, "peer_retry_delay": c.poll.String(),
	}
}

func writeOutputs(res *results, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
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

func markdown(res *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# baton benchmarks\n\n")
	fmt.Fprintf(&b, "Every backend of baton and its peers, measured side by side in one run (%s pass).\n\n", res.Mode)
	fmt.Fprintf(&b, "- Date: %s\n", res.Date)
	fmt.Fprintf(&b, "- Command: `%s`\n", res.Command)
	fmt.Fprintf(&b, "- Machine: %s, %s CPUs, %s memory, %s, %s/%s\n", res.Machine["cpu"], res.Machine["nproc"],
		res.Machine["memory"], res.Machine["kernel"], res.Machine["go"], res.Machine["goarch"])
	if v := res.Machine["redis"]; v != "" {
		fmt.Fprintf(&b, "- Redis: %s; etcd: embedded server, one member, fsync off\n", v)
	}
	cfg, _ := json.Marshal(res.Config)
	fmt.Fprintf(&b, "- Settings: `%s`\n\n", cfg)
	b.WriteString(`How to read the tables: each subject ran the workload once per repetition,
interleaved with the others (A B C A B C …); a figure is the median of the
repetitions, with their minimum and maximum in brackets where shown. Baton's
rows are in bold. "cost vs X" divides this row's median cost by X's: time
per operation in throughput tables, median latency in latency tables, bytes
in memory tables; below 1 is better than X.

- Each run has two halves. The first is untimed: the clock is read once per
  batch of operations (it costs about 60 ns on some virtual machines, more
  than a futex lock), and gives ops/s, fairness and CPU. The second reads
  the clock around every operation and gives the latencies and worst wait.
- Latency p50/p99/max: one Lock+Unlock cycle (take + give back); in contended
  runs it includes the wait.
- Worst wait: the longest a single Lock (or RLock, Acquire) waited.
- CPU/op: user + system time of the process (and of the redis-server
  processes in Redis tables; the embedded etcd server runs inside the process,
  so etcd rows include it) divided by the acquisitions of both halves.
- Fairness: fewest acquisitions of one contender divided by the most.
- Every contender has its own handle (its own connection state), as separate
  processes would; sync.Mutex, sync.RWMutex and the buffered channel are
  shared Go objects, the floor of what any lock can cost. In the
  "goroutines" tables baton's handles share one Backend, and on Redis the
  handles of one Backend pass a Mutex among themselves without the server;
  the "clients" table gives each contender a Backend of its own, and the
  handoff tables put holder and waiter in two Backends.
- Polling peers (redsync, bsm/redislock, the raw SET NX floor) retry every
  ` + res.Config["peer_retry_delay"].(string) + `; redsync's default delay is 50–250 ms and bsm/redislock has none.
- Memory is the Go heap only; kernel objects (files, System V sets, shared
  pages) and server-side memory are not counted.

Which backend for what: on one host, local with the futex Mutex and the
System V RWMutex and Semaphore is the fast choice (the flock mechanisms suit
files that other tools lock too); across machines, Redis gives the lowest
latency and etcd the strongest consistency (lease-bound keys, FIFO by
revision) at a few milliseconds per handoff.

`)
	section := ""
	for _, t := range res.Tables {
		if t.Section != section {
			section = t.Section
			fmt.Fprintf(&b, "## %s\n\n", section)
		}
		fmt.Fprintf(&b, "### %s\n\n", t.Title)
		head, cells := t.columns()
		b.WriteString("| " + strings.Join(head, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat(" --- |", len(head)) + "\n")
		for _, c := range cells {
			for i := range c {
				c[i] = strings.ReplaceAll(c[i], "|", "\\|")
			}
			b.WriteString("| " + strings.Join(c, " | ") + " |\n")
		}
		if chartSVG(t) != "" {
			fmt.Fprintf(&b, "\n![%s](charts/%s.svg)\n", html.EscapeString(t.Title), t.ID)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// chartSVG draws a table as horizontal bars on a log scale: throughput and
// worst wait side by side, or p50 and p99, or bytes. Baton's bars are blue.
func chartSVG(t *table) string {
	type panel struct {
		title string
		key   string
		f     func(float64) string
	}
	var panels []panel
	switch t.Metric {
	case "throughput":
		panels = []panel{{"throughput (ops/s, log scale)", "throughput", fmtRate}, {"worst wait (log scale)", "worst_wait", fmtDur}}
	case "latency":
		panels = []panel{{"p50 (log scale)", "p50", fmtDur}, {"p99 (log scale)", "p99", fmtDur}}
	default:
		panels = []panel{{"Go heap bytes (log scale)", "bytes", fmtBytes}}
	}
	var rows []*row
	for _, r := range t.Rows {
		if r.Summary != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return ""
	}
	const (
		labelW = 190
		panelW = 330
		rowH   = 22
		top    = 48
	)
	w := labelW + len(panels)*(panelW+20)
	h := top + len(rows)*rowH + 16
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="8" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(t.Title))
	for i, r := range rows {
		y := top + i*rowH
		weight := "normal"
		if r.Baton {
			weight = "bold"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" font-weight="%s">%s</text>`+"\n", labelW-8, y+15, weight, html.EscapeString(r.Subject))
	}
	for p, pn := range panels {
		x0 := labelW + p*(panelW+20)
		fmt.Fprintf(&b, `<text x="%d" y="38" fill="#444">%s</text>`+"\n", x0, pn.title)
		lo, hi := math.Inf(1), 0.0
		for _, r := range rows {
			v := r.Summary[pn.key].Median
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if hi == 0 {
			continue
		}
		// Log scale from a decade below the smallest value to the largest.
		l0 := math.Floor(math.Log10(lo)) - 0.3
		l1 := math.Log10(hi)
		span := math.Max(l1-l0, 0.5)
		barMax := float64(panelW - 80)
		for i, r := range rows {
			v := r.Summary[pn.key].Median
			y := top + i*rowH
			bw := 0.0
			if v > 0 {
				bw = (math.Log10(v) - l0) / span * barMax
			}
			color := "#9aa5b1"
			if r.Baton {
				color = "#2f6fdf"
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y+3, math.Max(bw, 1), rowH-6, color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#222">%s</text>`+"\n", float64(x0)+math.Max(bw, 1)+4, y+15, html.EscapeString(pn.f(v)))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
