package main

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// interval is a point estimate with a 95% interval (pairedStat says
// which). Lo and Hi are
// NaN when the repetitions are too few for an interval (unknown); they are
// omitted from JSON then, so "no interval" reads the same in old and new
// results files.
type interval struct {
	Value float64 `json:"value"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

// known reports whether the interval has bounds.
func (iv interval) known() bool {
	return !math.IsNaN(iv.Lo) && !math.IsNaN(iv.Hi) && !math.IsNaN(iv.Value)
}

// within reports whether the interval lies inside ±frac of its value.
func (iv interval) within(frac float64) bool {
	return iv.known() && iv.Lo >= iv.Value*(1-frac) && iv.Hi <= iv.Value*(1+frac)
}

// overlaps reports whether two known intervals share a point.
func (iv interval) overlaps(o interval) bool {
	return iv.known() && o.known() && iv.Lo <= o.Hi && o.Lo <= iv.Hi
}

const (
	bootRounds = 2000
	// minBootN is the fewest repetitions that get an interval: with fewer,
	// resampling only reshuffles one or two values.
	minBootN = 3
)

func unknown(v float64) interval { return interval{Value: v, Lo: math.NaN(), Hi: math.NaN()} }

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianInPlace sorts v and returns its median.
func medianInPlace(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// rngFor seeds the resampling from a label, so that the same data always
// gives the same interval (a re-rendered report does not move).
func rngFor(label string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(label))
	return rand.New(rand.NewPCG(h.Sum64(), 0x62617a6f6e))
}

// percentiles returns the 2.5th and 97.5th percentiles of est.
func percentiles(est []float64) (float64, float64) {
	slices.Sort(est)
	at := func(q float64) float64 {
		i := q * float64(len(est)-1)
		lo := int(math.Floor(i))
		hi := min(lo+1, len(est)-1)
		return est[lo] + (est[hi]-est[lo])*(i-float64(lo))
	}
	return at(0.025), at(0.975)
}

// pairedStat is stat over paired repetitions, with its interval: cols[j][k]
// is column j's figure in repetition k.
//
// With minOrderN repetitions or more, stat is taken of each repetition
// (the same k for every column: the pairing of an interleaved run cancels
// what moved them all), and the value is the median of those, with the
// distribution-free interval of a median from order statistics: it covers
// at least 95% for any distribution of independent repetitions, where a
// bootstrap of a median from a dozen repetitions covers less (two runs of
// the same code then disagree more often than one in twenty).
//
// With fewer, each bootstrap round draws repetitions (again the same k for
// every column) and evaluates stat on the medians of the columns over the
// draw; the value is stat of the medians of all repetitions.
func pairedStat(label string, cols [][]float64, stat func(meds []float64) float64) interval {
	n := -1
	for _, c := range cols {
		if n < 0 || len(c) < n {
			n = len(c)
		}
	}
	if n <= 0 {
		return unknown(math.NaN())
	}
	if n >= minOrderN {
		if iv, ok := perRepetition(cols, n, stat); ok {
			return iv
		}
	}
	meds := make([]float64, len(cols))
	for j, c := range cols {
		meds[j] = median(c[:n])
	}
	v := stat(meds)
	if n < minBootN || math.IsNaN(v) || math.IsInf(v, 0) {
		return unknown(v)
	}
	rng := rngFor(label)
	buf := make([]float64, n)
	idx := make([]int, n)
	est := make([]float64, 0, bootRounds)
	for range bootRounds {
		for k := range idx {
			idx[k] = rng.IntN(n)
		}
		for j, c := range cols {
			for k, i := range idx {
				buf[k] = c[i]
			}
			meds[j] = medianInPlace(buf)
		}
		if e := stat(meds); !math.IsNaN(e) && !math.IsInf(e, 0) {
			est = append(est, e)
		}
	}
	if len(est) < bootRounds/2 {
		return unknown(v)
	}
	lo, hi := percentiles(est)
	return interval{Value: v, Lo: lo, Hi: hi}
}

// minOrderN is the fewest repetitions whose extremes bound the median with
// 95% confidence (1 - 2·2^-6 > 95%).
const minOrderN = 6

// perRepetition is pairedStat's order-statistic case: stat of each of the n
// repetitions, their median, and the interval between the k-th smallest
// and the k-th largest, for the largest k whose chance that the true
// median lies outside, 2·P(Binomial(n, 1/2) < k), is at most 5%. A
// repetition whose stat is not finite (a zero reference) leaves it to the
// bootstrap.
func perRepetition(cols [][]float64, n int, stat func(meds []float64) float64) (interval, bool) {
	vals, ok := repStats(cols, n, stat)
	if !ok {
		return interval{}, false
	}
	v := medianInPlace(vals)
	k := orderRank(n)
	return interval{Value: v, Lo: vals[k-1], Hi: vals[n-k]}, true
}

// repStats is stat of each of the first n repetitions of cols, and
// whether every one is finite.
func repStats(cols [][]float64, n int, stat func(meds []float64) float64) ([]float64, bool) {
	vals := make([]float64, n)
	rep := make([]float64, len(cols))
	for k := range n {
		for j, c := range cols {
			rep[j] = c[k]
		}
		vals[k] = stat(rep)
		if math.IsNaN(vals[k]) || math.IsInf(vals[k], 0) {
			return nil, false
		}
	}
	return vals, true
}

// orderRank is the k of perRepetition for n repetitions (n ≥ minOrderN).
func orderRank(n int) int {
	// tail = P(Binomial(n, 1/2) < k+1), grown one term at a time.
	term := math.Pow(0.5, float64(n)) // P(X = 0)
	tail := term
	k := 0
	for k+1 <= n/2 {
		if 2*tail > 0.05 {
			break
		}
		k++
		term *= float64(n-k+1) / float64(k) // P(X = k)
		tail += term
	}
	return max(k, 1)
}

// ratioCI is the ratio a/b with its paired interval (pairedStat): for
// enough repetitions the median of the per-repetition ratios, for fewer
// the ratio of medians.
func ratioCI(label string, a, b []float64) interval {
	return pairedStat(label, [][]float64{a, b}, func(m []float64) float64 {
		if m[1] <= 0 {
			return math.NaN()
		}
		return m[0] / m[1]
	})
}

// medianCI is the median of v with its interval.
func medianCI(label string, v []float64) interval {
	return pairedStat(label, [][]float64{v}, func(m []float64) float64 { return m[0] })
}

// changeCI is median(b)/median(a) for two independent runs.
func changeCI(label string, a, b []float64) interval {
	return runChange(label, [][]float64{a}, [][]float64{b}, func(m []float64) float64 { return m[0] })
}

// runChange is stat on the medians of NEW's columns over stat on OLD's, with
// an interval: the two runs are resampled independently (nothing pairs the
// repetitions of two runs), each keeping the pairing of its own
// repetitions.
func runChange(label string, old, new [][]float64, stat func(meds []float64) float64) interval {
	// Where pairedStat takes the median of per-repetition figures, so does
	// the change: each run is then one column of them.
	if ro, ok := repColumn(old, stat); ok {
		if rn, ok := repColumn(new, stat); ok {
			old, new, stat = [][]float64{ro}, [][]float64{rn}, func(m []float64) float64 { return m[0] }
		}
	}
	vo := pairedStat(label+"/old", old, stat)
	vn := pairedStat(label+"/new", new, stat)
	v := vn.Value / vo.Value
	if !vo.known() || !vn.known() {
		return unknown(v)
	}
	rng := rngFor(label)
	est := make([]float64, 0, bootRounds)
	draw := func(cols [][]float64) float64 {
		n := len(cols[0])
		for _, c := range cols {
			n = min(n, len(c))
		}
		idx := make([]int, n)
		for k := range idx {
			idx[k] = rng.IntN(n)
		}
		meds := make([]float64, len(cols))
		buf := make([]float64, n)
		for j, c := range cols {
			for k, i := range idx {
				buf[k] = c[i]
			}
			meds[j] = medianInPlace(buf)
		}
		return stat(meds)
	}
	for range bootRounds {
		o, n := draw(old), draw(new)
		if e := n / o; o != 0 && !math.IsNaN(e) && !math.IsInf(e, 0) {
			est = append(est, e)
		}
	}
	if len(est) < bootRounds/2 {
		return unknown(v)
	}
	lo, hi := percentiles(est)
	return interval{Value: v, Lo: lo, Hi: hi}
}

// repColumn is the per-repetition figures of cols when pairedStat takes
// them (minOrderN repetitions or more, all finite).
func repColumn(cols [][]float64, stat func(meds []float64) float64) ([]float64, bool) {
	n := -1
	for _, c := range cols {
		if n < 0 || len(c) < n {
			n = len(c)
		}
	}
	if n < minOrderN {
		return nil, false
	}
	return repStats(cols, n, stat)
}

// Verdicts of a goal.
const (
	verdictMet       = "met"
	verdictNotMet    = "not met"
	verdictUndecided = "undecided"
)

// verdict checks iv against bound: with atMost the goal is value <= bound,
// else value >= bound. It is met when the whole interval satisfies the
// goal, not met when none of it does, and undecided when the interval
// straddles the bound or is unknown.
func verdict(iv interval, bound float64, atMost bool) string {
	if !iv.known() {
		return verdictUndecided
	}
	if atMost {
		switch {
		case iv.Hi <= bound:
			return verdictMet
		case iv.Lo > bound:
			return verdictNotMet
		}
	} else {
		switch {
		case iv.Lo >= bound:
			return verdictMet
		case iv.Hi < bound:
			return verdictNotMet
		}
	}
	return verdictUndecided
}

// intervalJSON is the file form of an interval: a missing bound is an
// unknown one.
type intervalJSON struct {
	Value *float64 `json:"value,omitempty"`
	Lo    *float64 `json:"lo,omitempty"`
	Hi    *float64 `json:"hi,omitempty"`
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func (iv interval) MarshalJSON() ([]byte, error) {
	return json.Marshal(intervalJSON{finite(iv.Value), finite(iv.Lo), finite(iv.Hi)})
}

func (iv *interval) UnmarshalJSON(b []byte) error {
	var j intervalJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	get := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	*iv = interval{get(j.Value), get(j.Lo), get(j.Hi)}
	return nil
}
