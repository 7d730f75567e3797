//go:build linux

package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// noisy returns n values around mean with a multiplicative spread.
func noisy(rng *rand.Rand, n int, mean, spread float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = mean * math.Exp(spread*rng.NormFloat64())
	}
	return v
}

func TestRatioCIIsRatioOfMediansWithBracketingInterval(t *testing.T) {
	a := []float64{10, 12, 11, 13, 9}
	b := []float64{5, 6, 5.5, 7, 4}
	iv := ratioCI("t", a, b)
	if want := 11.0 / 5.5; math.Abs(iv.Value-want) > 1e-12 {
		t.Fatalf("value = %v, want the ratio of medians %v", iv.Value, want)
	}
	if !iv.known() || iv.Lo > iv.Value || iv.Hi < iv.Value || iv.Lo >= iv.Hi {
		t.Fatalf("interval %+v does not bracket its value", iv)
	}
	if again := ratioCI("t", a, b); again != iv {
		t.Fatalf("same data and label gave %+v, then %+v", iv, again)
	}
}

// Pairing: when both rows move together from one repetition to the next
// (the machine got slower for both), the ratio is steady and its interval
// narrow, much narrower than the same values shuffled out of their pairs.
func TestRatioCIKeepsThePairing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	drift := noisy(rng, 15, 1, 0.3)
	a, b := make([]float64, 15), make([]float64, 15)
	for i, d := range drift {
		a[i] = 2 * d * math.Exp(0.01*rng.NormFloat64())
		b[i] = d
	}
	paired := ratioCI("p", a, b)
	shuffled := append([]float64(nil), b...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	unpaired := ratioCI("p", a, shuffled)
	if !paired.within(0.05) {
		t.Errorf("paired interval %+v is not within ±5%% of its value", paired)
	}
	if w, u := paired.Hi-paired.Lo, unpaired.Hi-unpaired.Lo; w*3 > u {
		t.Errorf("paired width %.3f is not far below the unpaired %.3f", w, u)
	}
}

// Coverage: over many simulated runs with a known true ratio, the 95%
// interval contains it most of the time (a percentile bootstrap of a median
// from 15 repetitions covers somewhat less than its nominal level).
func TestRatioCICoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const trials = 300
	covered := 0
	for i := range trials {
		a := noisy(rng, 15, 1.3, 0.15)
		b := noisy(rng, 15, 1.0, 0.15)
		iv := ratioCI(strings.Repeat("x", i%7)+string(rune('a'+i%26)), a, b)
		if iv.Lo <= 1.3 && 1.3 <= iv.Hi {
			covered++
		}
	}
	if frac := float64(covered) / trials; frac < 0.85 || frac > 0.995 {
		t.Fatalf("interval covered the true ratio in %.1f%% of %d runs", 100*frac, trials)
	}
}

func TestTooFewRepetitionsHaveNoInterval(t *testing.T) {
	iv := ratioCI("t", []float64{2, 4}, []float64{1, 2})
	if iv.known() || iv.Value != 2 {
		t.Fatalf("two repetitions gave %+v, want value 2 and no interval", iv)
	}
	if iv := ratioCI("t", nil, []float64{1, 2, 3}); iv.known() || !math.IsNaN(iv.Value) {
		t.Fatalf("no samples gave %+v", iv)
	}
	if iv := ratioCI("t", []float64{1, 2, 3}, []float64{0, 0, 0}); iv.known() {
		t.Fatalf("a zero reference gave an interval: %+v", iv)
	}
}

func TestVerdict(t *testing.T) {
	iv := func(v, lo, hi float64) interval { return interval{Value: v, Lo: lo, Hi: hi} }
	for _, c := range []struct {
		name   string
		iv     interval
		bound  float64
		atMost bool
		want   string
	}{
		{"at most, all below", iv(1.05, 1.0, 1.09), 1.1, true, verdictMet},
		{"at most, touching", iv(1.05, 1.0, 1.1), 1.1, true, verdictMet},
		{"at most, all above", iv(1.3, 1.2, 1.4), 1.1, true, verdictNotMet},
		{"at most, straddles", iv(1.08, 1.0, 1.2), 1.1, true, verdictUndecided},
		{"at most, value above but straddles", iv(1.15, 1.05, 1.3), 1.1, true, verdictUndecided},
		{"at least, all above", iv(2.3, 2.1, 2.6), 2, false, verdictMet},
		{"at least, all below", iv(0.83, 0.7, 0.95), 2, false, verdictNotMet},
		{"at least, straddles", iv(2.1, 1.8, 2.4), 2, false, verdictUndecided},
		{"unknown interval", unknown(1.0), 1.1, true, verdictUndecided},
		{"nothing measured", unknown(math.NaN()), 1.1, true, verdictUndecided},
	} {
		if got := verdict(c.iv, c.bound, c.atMost); got != c.want {
			t.Errorf("%s: verdict(%+v, %v, %v) = %q, want %q", c.name, c.iv, c.bound, c.atMost, got, c.want)
		}
	}
}

func TestIntervalWithinAndOverlaps(t *testing.T) {
	a := interval{Value: 1, Lo: 0.92, Hi: 1.08}
	if !a.within(0.10) || a.within(0.05) {
		t.Errorf("within: %+v", a)
	}
	if !a.overlaps(interval{Value: 1.1, Lo: 1.05, Hi: 1.2}) || a.overlaps(interval{Value: 1.2, Lo: 1.1, Hi: 1.3}) {
		t.Error("overlaps")
	}
	if unknown(1).within(0.5) || unknown(1).overlaps(a) {
		t.Error("an unknown interval is within or overlaps")
	}
}

func TestIntervalJSONLeavesUnknownOut(t *testing.T) {
	b, err := json.Marshal(map[string]interval{"known": {1.5, 1.2, 1.9}, "unknown": unknown(2), "none": unknown(math.NaN())})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"known":{"value":1.5,"lo":1.2,"hi":1.9},"none":{},"unknown":{"value":2}}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	var back map[string]interval
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["known"] != (interval{1.5, 1.2, 1.9}) || back["unknown"].known() || back["unknown"].Value != 2 || !math.IsNaN(back["none"].Value) {
		t.Fatalf("round trip: %+v", back)
	}
}

func TestChangeCI(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	old := noisy(rng, 9, 100, 0.05)
	slower := noisy(rng, 9, 130, 0.05)
	same := noisy(rng, 9, 100, 0.05)
	if iv := changeCI("c", old, slower); judge(iv, 0.05) != "worse" {
		t.Errorf("30%% slower judged %q: %+v", judge(iv, 0.05), iv)
	}
	if iv := changeCI("c", old, same); judge(iv, 0.05) != "" {
		t.Errorf("no change judged %q: %+v", judge(iv, 0.05), iv)
	}
	if iv := changeCI("c", slower, old); judge(iv, 0.05) != "better" {
		t.Errorf("30%% faster judged %q: %+v", judge(iv, 0.05), iv)
	}
	if iv := changeCI("c", old[:2], slower[:2]); iv.known() || judge(iv, 0.05) != "unknown" {
		t.Errorf("two repetitions: %+v judged %q", iv, judge(iv, 0.05))
	}
}

// The order-statistic rank: the interval from the k-th smallest to the
// k-th largest of n repetitions is the narrowest whose miss chance,
// 2·P(Binomial(n, 1/2) < k), is at most 5% (the known table values).
func TestOrderRank(t *testing.T) {
	for n, want := range map[int]int{6: 1, 7: 1, 8: 1, 9: 2, 10: 2, 11: 2, 12: 3, 13: 3, 14: 3, 15: 4, 20: 6, 25: 8, 30: 10} {
		if got := orderRank(n); got != want {
			t.Errorf("orderRank(%d) = %d, want %d", n, got, want)
		}
	}
}

// From minOrderN repetitions on, a ratio is the median of the paired
// per-repetition ratios, bounded by order statistics of them.
func TestRatioCIOrderStatistics(t *testing.T) {
	a := []float64{2, 4, 6, 8, 10, 12, 14, 16, 18}
	b := []float64{1, 1, 2, 2, 2, 3, 2, 4, 3} // ratios 2 4 3 4 5 4 7 4 6
	iv := ratioCI("o", a, b)
	if iv.Value != 4 || iv.Lo != 3 || iv.Hi != 6 {
		t.Fatalf("got %+v, want 4 [3–6] (median, 2nd smallest, 2nd largest of the ratios)", iv)
	}
	b[3] = 0 // no ratio in that repetition: the ratio of medians, bootstrapped
	if iv := ratioCI("o", a, b); iv.Value != 10.0/2 {
		t.Fatalf("with a zero reference in one repetition: %+v, want the ratio of medians 5", iv)
	}
}
