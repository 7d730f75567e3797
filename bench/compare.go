//go:build linux

package main

import (
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
)

// fmtChange prints a change factor with its interval: ×1.08 [1.02–1.15].
func fmtChange(iv interval) string {
	if math.IsNaN(iv.Value) {
		return "×?"
	}
	if !iv.known() {
		return "×" + fmtX(iv.Value) + " [no interval]"
	}
	return fmt.Sprintf("×%s [%s–%s]", fmtX(iv.Value), fmtX(iv.Lo), fmtX(iv.Hi))
}

// judge says whether a change (of a cost: above 1 is worse) is beyond the
// noise: its interval excludes 1 and it exceeds tol. With no interval it
// is "unknown" when the point alone exceeds tol.
func judge(iv interval, tol float64) string {
	switch {
	case math.IsNaN(iv.Value):
		return ""
	case !iv.known():
		if math.Abs(iv.Value-1) > tol {
			return "unknown"
		}
		return ""
	case iv.Lo > 1 && iv.Value > 1+tol:
		return "worse"
	case iv.Hi < 1 && iv.Value < 1-tol:
		return "better"
	}
	return ""
}

// comparison tallies what compareResults found.
type comparison struct {
	rows, ratios, agree, disagree, unknownRatios int
	regressions, failures                        []string
}

// prepared returns t with summaries and intervals computed from its
// samples; a table whose rows carry no samples keeps the figures it was
// stored with (intervals then unknown).
func prepared(t *table) *table {
	for _, r := range t.Rows {
		if len(r.Samples) == 0 && r.Err == "" && r.Cost != nil {
			return t
		}
	}
	finishTable(t)
	return t
}

// figureText is the headline figure of a row.
func (t *table) figureText(r *row) string {
	s := r.Summary
	switch t.Metric {
	case "throughput":
		return fmtRate(s["throughput"].Median) + " ops/s"
	case "latency":
		return fmtDur(s["p50"].Median) + " p50"
	}
	return fmtBytes(s["bytes"].Median)
}

func ratioText(r *row, ref string) string {
	if iv, ok := r.Ratios[ref]; ok {
		return fmtRatio(iv)
	}
	if v, ok := r.Cost[ref]; ok {
		return fmtRatio(unknown(v))
	}
	return "—"
}

// compareResults writes the change of every row of NEW against OLD.
func compareResults(w io.Writer, old, new *results, tol float64) comparison {
	var c comparison
	fmt.Fprintf(w, "OLD: %s pass of %s (%s)\nNEW: %s pass of %s (%s)\n", old.Mode, old.Date, old.Command, new.Mode, new.Date, new.Command)
	if old.Mode != new.Mode || !reflect.DeepEqual(old.Config, new.Config) {
		fmt.Fprintln(w, "note: the passes differ in size; absolute figures may differ by that alone, the ratios to peers are what compare")
	}
	fmt.Fprintf(w, "flagged: a change whose 95%% interval excludes no change and that exceeds %.0f%%\n", tol*100)
	oldT := map[string]*table{}
	for _, t := range old.Tables {
		oldT[t.ID] = prepared(t)
	}
	for _, nt := range new.Tables {
		nt = prepared(nt)
		ot := oldT[nt.ID]
		fmt.Fprintf(w, "\n%s — %s [%s]\n", nt.Section, nt.Title, nt.ID)
		if ot == nil {
			fmt.Fprintln(w, "  only in NEW")
			continue
		}
		if ot.Title != nt.Title || ot.Metric != nt.Metric {
			fmt.Fprintf(w, "  a different workload in OLD (%q): not compared\n", ot.Title)
			continue
		}
		delete(oldT, nt.ID)
		for _, nr := range nt.Rows {
			compareRow(w, &c, ot, nt, nr, tol)
		}
	}
	for _, t := range old.Tables {
		if oldT[t.ID] != nil {
			fmt.Fprintf(w, "\n%s — %s [%s]\n  only in OLD\n", t.Section, t.Title, t.ID)
		}
	}
	fmt.Fprintf(w, "\n%d rows compared; %d baton-vs-peer ratios: %d agree within their intervals, %d do not, %d without intervals\n",
		c.rows, c.ratios, c.agree, c.disagree, c.unknownRatios)
	if len(c.failures) > 0 {
		fmt.Fprintf(w, "FAILED in NEW: %s\n", strings.Join(c.failures, "; "))
	}
	if len(c.regressions) > 0 {
		fmt.Fprintf(w, "REGRESSIONS: %s\n", strings.Join(c.regressions, "; "))
	} else {
		fmt.Fprintln(w, "no regression beyond the noise")
	}
	return c
}

func compareRow(w io.Writer, c *comparison, ot, nt *table, nr *row, tol float64) {
	mark := "  "
	if nr.Baton {
		mark = "* "
	}
	or := ot.row(nr.Subject)
	switch {
	case nr.failed():
		fmt.Fprintf(w, "%s%-24s FAILED: %s\n", mark, nr.Subject, nr.Err)
		c.failures = append(c.failures, nt.ID+" / "+nr.Subject)
		return
	case or == nil:
		fmt.Fprintf(w, "%s%-24s only in NEW\n", mark, nr.Subject)
		return
	case or.failed():
		fmt.Fprintf(w, "%s%-24s failed in OLD (%s); %s in NEW\n", mark, nr.Subject, or.Err, nt.figureText(nr))
		return
	}
	c.rows++
	var ch interval
	if len(or.Samples) > 0 && len(nr.Samples) > 0 {
		ch = runChange(nt.ID+"/"+nr.Subject, [][]float64{ot.costs(or)}, [][]float64{nt.costs(nr)}, func(m []float64) float64 { return m[0] })
	} else {
		ch = unknown(nt.cost(nr) / ot.cost(or))
	}
	j := judge(ch, tol)
	label := map[string]string{"worse": "slower", "better": "faster", "unknown": "changed? (no interval)"}[j]
	if nt.Metric == "memory" {
		label = map[string]string{"worse": "larger", "better": "smaller", "unknown": "changed? (no interval)"}[j]
	}
	var cmp []string
	for _, ref := range nt.Refs {
		if ref != nr.Subject && nt.row(ref) != nil && !nt.row(ref).failed() && ot.row(ref) != nil && !ot.row(ref).failed() {
			cmp = append(cmp, ref)
		}
	}
	peers := slices.DeleteFunc(slices.Clone(cmp), func(ref string) bool { return nt.row(ref).Baton })
	// A baton row without peers in the table is judged on its own figure.
	if nr.Baton && len(peers) == 0 && j == "worse" {
		label = "REGRESSION"
		c.regressions = append(c.regressions, fmt.Sprintf("%s / %s %s", nt.ID, nr.Subject, fmtChange(ch)))
	}
	fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("%s%-24s %s → %s   cost %s  %s", mark, nr.Subject, ot.figureText(or), nt.figureText(nr), fmtChange(ch), label), " "))
	if !nr.Baton {
		return
	}
	for _, ref := range cmp {
		isPeer := slices.Contains(peers, ref)
		var rc interval
		if len(or.Samples) > 0 && len(nr.Samples) > 0 && len(ot.row(ref).Samples) > 0 && len(nt.row(ref).Samples) > 0 {
			rc = runChange(nt.ID+"/"+nr.Subject+"/"+ref,
				[][]float64{ot.costs(or), ot.costs(ot.row(ref))}, [][]float64{nt.costs(nr), nt.costs(nt.row(ref))},
				func(m []float64) float64 { return m[0] / m[1] })
		} else {
			rc = unknown(nr.Cost[ref] / or.Cost[ref])
		}
		var notes []string
		switch judge(rc, tol) {
		case "worse":
			if isPeer {
				notes = append(notes, "REGRESSION")
				c.regressions = append(c.regressions, fmt.Sprintf("%s / %s vs %s %s", nt.ID, nr.Subject, ref, fmtChange(rc)))
			} else {
				notes = append(notes, "worse")
			}
		case "better":
			notes = append(notes, "better")
		case "unknown":
			notes = append(notes, "changed? (no interval)")
		}
		if isPeer {
			c.ratios++
			oi, oki := or.Ratios[ref]
			ni, nki := nr.Ratios[ref]
			switch {
			case !oki || !nki || !oi.known() || !ni.known():
				c.unknownRatios++
				notes = append(notes, "agreement unknown")
			case oi.overlaps(ni):
				c.agree++
				notes = append(notes, "agree")
			default:
				c.disagree++
				notes = append(notes, "DISAGREE")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("    vs %-22s %s → %s   %s  %s", ref, ratioText(or, ref), ratioText(nr, ref), fmtChange(rc), strings.Join(notes, ", ")), " "))
	}
}

// compareFiles is -compare: it exits 1 when NEW has a failed subject or a
// regression was flagged.
func compareFiles(oldPath, newPath string, tol float64, stdout, stderr io.Writer) int {
	old, err := loadResults(oldPath)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	new, err := loadResults(newPath)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	c := compareResults(stdout, old, new, tol)
	if len(c.regressions) > 0 || len(c.failures) > 0 {
		return 1
	}
	return 0
}
