//go:build linux

package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

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
		if !r.failed() {
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
