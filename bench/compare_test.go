//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/old.json is three tables of a full pass as the harness wrote
// them before ratios had intervals (no "ratios", no "goals"); new.json is
// the same data in the current format, as a quick pass, with baton redis
// 30% slower in the uncontended Redis table, baton etcd at half its
// throughput in the cluster semaphore table, and a repeated sync.Mutex row.
func TestCompareSavedResults(t *testing.T) {
	var out, errw bytes.Buffer
	code := realMain([]string{"-compare", "testdata/old.json", "testdata/new.json"}, &out, &errw)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (regressions flagged); stderr %s", code, errw.String())
	}
	got := out.String()
	for _, line := range []string{
		"OLD: full pass of 2026-11-30T11:37:38Z (cd bench && go run . -full)",
		"NEW: quick pass of 2026-12-01T09:00:00Z (cd bench && go run . -quick)",
		"note: the passes differ in size; absolute figures may differ by that alone, the ratios to peers are what compare",
		"Same host — Mutex, uncontended Lock+Unlock [mutex-uncontended]",
		"* baton local/futex        37.4M ops/s → 37.4M ops/s   cost ×1.00 [0.97–1.03]",
		"    vs sync.Mutex             1.58× [1.55–1.68] → 1.58× [1.55–1.68]   ×1.00 [0.93–1.07]  agree",
		"  sync.Mutex (again)       only in NEW",
		"* baton redis              6.62k ops/s → 4.64k ops/s   cost ×1.43 [0.94–2.16]",
		"    vs bsm/redislock          0.93× [0.76–1.10] → 1.33× [1.08–1.57]   ×1.43 [1.02–2.00]  REGRESSION, agree",
		"    vs raw Redlock 3 nodes    0.48× [0.43–0.55] → 0.69× [0.61–0.79]   ×1.43 [1.12–1.82]  REGRESSION, DISAGREE",
		"    vs baton redis            3.42× [2.46–3.90] → 2.39× [1.72–2.73]   ×0.70 [0.51–0.92]  better",
		"* baton etcd               734 ops/s → 367 ops/s   cost ×2.00 [1.03–3.87]  REGRESSION",
		"15 rows compared; 14 baton-vs-peer ratios: 13 agree within their intervals, 1 do not, 0 without intervals",
		"REGRESSIONS: redis-uncontended / baton redis vs bsm/redislock ×1.43 [1.02–2.00]; redis-uncontended / baton redis vs raw Redlock 3 nodes ×1.43 [1.12–1.82]; cluster-sem / baton etcd ×2.00 [1.03–3.87]",
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("output lacks the line\n%s", line)
		}
	}
	// baton redlock did not change: nothing of it is flagged.
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "* baton redlock") && strings.Contains(l, "REGRESSION") {
			t.Errorf("unchanged row flagged: %s", l)
		}
	}
	if t.Failed() {
		t.Log(got)
	}
}

func TestCompareSameRunFlagsNothing(t *testing.T) {
	var out, errw bytes.Buffer
	if code := realMain([]string{"-compare", "testdata/new.json", "testdata/new.json"}, &out, &errw); code != 0 {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	for _, s := range []string{"16 rows compared; 14 baton-vs-peer ratios: 14 agree", "no regression beyond the noise"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
	if strings.Contains(out.String(), "note: the passes differ") {
		t.Error("a pass compared with itself is said to differ")
	}
}

// Rows stored without samples (only their medians and ratios) still
// compare; their changes have no interval, so they are shown and not
// flagged.
func TestCompareWithoutSamples(t *testing.T) {
	res, err := loadResults("testdata/old.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range res.Tables {
		for _, r := range tb.Rows {
			r.Samples = nil
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "bare.json")
	if err := os.WriteFile(bare, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errw bytes.Buffer
	code := realMain([]string{"-compare", bare, "testdata/new.json"}, &out, &errw)
	got := out.String()
	for _, line := range []string{
		"* baton redis              6.62k ops/s → 4.64k ops/s   cost ×1.43 [no interval]  changed? (no interval)",
		"    vs raw SET NX + EVAL      1.00× → 1.42× [1.05–2.13]   ×1.43 [no interval]  changed? (no interval), agreement unknown",
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("output lacks the line\n%s\n%s", line, got)
		}
	}
	if code != 0 || !strings.Contains(got, "no regression beyond the noise") {
		t.Errorf("exit %d: unknown changes were flagged", code)
	}
}

func TestCompareUsage(t *testing.T) {
	var out, errw bytes.Buffer
	if code := realMain([]string{"-compare", "testdata/old.json"}, &out, &errw); code != 2 {
		t.Errorf("one file: exit %d", code)
	}
	if code := realMain([]string{"-compare", "testdata/old.json", "testdata/missing.json"}, &out, &errw); code != 2 {
		t.Errorf("a missing file: exit %d", code)
	}
}
