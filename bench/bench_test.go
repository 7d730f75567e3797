//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func onPath(name string) bool { _, err := exec.LookPath(name); return err == nil }

func TestMain(m *testing.M) {
	if ok, code := workerMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestSmoke runs a tiny pass of every section and checks that every row
// produced figures and that the outputs are written.
func TestSmoke(t *testing.T) {
	sel, _ := parseOnly("")
	want := sel.sections
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not on PATH")
		}
		t.Log("redis-server not on PATH: the Redis section is left out")
		delete(want, "redis")
		delete(want, "memory")
		delete(want, "scale")
	}
	for sec, ok := range map[string]bool{"postgres": fileExists("/usr/lib/postgresql") || onPath("postgres"),
		"mysql":     onPath("mariadbd") || fileExists("/usr/sbin/mariadbd") || fileExists("/usr/sbin/mysqld"),
		"zookeeper": fileExists(zkJar) && onPath("java")} {
		if ok {
			continue
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("no %s server installed", sec)
		}
		t.Logf("no %s server installed: the section is left out", sec)
		delete(want, sec)
	}
	res, err := run(context.Background(), smokeConfig, "smoke", sel, "go test", os.Stderr, options{pin: newPinning(true)})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tb := range res.Tables {
		seen[tb.ID] = true
		if len(tb.Rows) == 0 {
			t.Errorf("%s: no rows", tb.ID)
		}
		for _, r := range tb.Rows {
			if len(r.Samples) != smokeConfig.reps {
				t.Errorf("%s / %s: %d samples, want %d", tb.ID, r.Subject, len(r.Samples), smokeConfig.reps)
				continue
			}
			switch tb.Metric {
			case "throughput":
				if r.Summary["throughput"].Median <= 0 {
					t.Errorf("%s / %s: no throughput", tb.ID, r.Subject)
				}
			case "latency":
				// The idle tables measure CPU per second of waiting, for
				// which 0 is what the goal asks.
				if r.Summary["p50"].Median <= 0 && !strings.HasPrefix(tb.ID, "idle-") {
					t.Errorf("%s / %s: no latency", tb.ID, r.Subject)
				}
			}
			for _, ref := range tb.Refs {
				if tb.Metric != "memory" && tb.row(ref) != nil && ref != r.Subject && r.Cost[ref] <= 0 {
					t.Errorf("%s / %s: no ratio to %s", tb.ID, r.Subject, ref)
				}
				if iv, ok := r.Ratios[ref]; ok && (!iv.known() || iv.Lo > iv.Value || iv.Hi < iv.Value) {
					t.Errorf("%s / %s: ratio to %s has no interval around it: %+v", tb.ID, r.Subject, ref, iv)
				}
			}
		}
	}
	for _, id := range []string{"mutex-uncontended", "mutex-g4", "mutex-p2", "mutex-handoff", "mutex-kill", "rw-kill", "sem-kill",
		"rw-uncontended-read", "rw-read-heavy", "sem-uncontended", "sem-n2", "sem-p2", "etcd-uncontended", "etcd-handoff", "etcd-kill",
		"idle-mutex", "idle-rw-read", "idle-rw-write", "idle-sem",
		"open-known", "open-fresh", "open-recurring", "residue", "queue-c1", "queue-c4", "queue-latency", "idle-queue", "rate-allow"} {
		if !seen[id] {
			t.Errorf("table %s missing", id)
		}
	}
	for _, id := range []string{"pg-uncontended", "pg-g4", "pg-c4", "pg-handoff", "mysql-uncontended", "mysql-g4", "mysql-c4", "mysql-handoff",
		"zk-uncontended", "zk-g4", "zk-c4", "zk-handoff", "pg-residue", "mysql-residue", "zk-residue",
		"pg-open-known", "pg-open-fresh", "mysql-open-known", "mysql-open-fresh", "zk-open-known", "zk-open-fresh"} {
		if want[sectionsOf(id)[0]] && !seen[id] {
			t.Errorf("table %s missing", id)
		}
	}
	for _, id := range []string{"redis-g4", "redis-residue", "etcd-residue", "redis-queue-uncontended", "redis-queue-w4",
		"redis-open-known", "redis-open-fresh", "etcd-open-known", "etcd-open-fresh"} {
		if want[sectionsOf(id)[0]] && !seen[id] {
			t.Errorf("table %s missing", id)
		}
	}

	dir := t.TempDir()
	if err := writeOutputs(res, dir, true); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "BENCH.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Goals) != len(goals) {
		t.Errorf("%d goal results for %d goals", len(res.Goals), len(goals))
	}
	for _, s := range []string{"Machine:", "Command: `go test`", "cost vs sync.Mutex", "charts/mutex-g4.svg",
		"## Goals", "| futex Mutex, uncontended Lock+Unlock ≤ 1.5× sync.Mutex | mutex-uncontended | ",
		"## Machine noise", "| Mutex, uncontended Lock+Unlock | sync.Mutex | ", "| etcd mutex, uncontended Lock+Unlock | etcd concurrency | "} {
		if !strings.Contains(string(md), s) {
			t.Errorf("BENCH.md lacks %q", s)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "charts", "mutex-g4.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(string(svg), "baton local/futex") {
		t.Errorf("chart is not an SVG of the table: %.80s", svg)
	}
}

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(durNs(i * 1000))
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 500_000}, {0.99, 990_000}} {
		got := h.quantile(c.q)
		if got < c.want*94/100 || got > c.want*106/100 {
			t.Errorf("quantile(%v) = %d, want %d within 6%%", c.q, got, c.want)
		}
	}
	if h.max != 1_000_000 {
		t.Errorf("max = %d", h.max)
	}
	var m hist
	m.merge(&h)
	m.merge(&h)
	if m.n != 2000 || m.quantile(0.5) != h.quantile(0.5) {
		t.Errorf("merge: n=%d p50=%d", m.n, m.quantile(0.5))
	}
	if s := summarize([]float64{5, 1, 3, 2, 4}); s != (summary{Median: 3, Min: 1, Max: 5}) {
		t.Errorf("summarize = %+v", s)
	}
}
