package main

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// interval is a point estimate with a 95% bootstrap interval. Lo and Hi are
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

// pairedStat bootstraps stat over paired repetitions: cols[j][k] is column
// j's figure in repetition k; each round draws repetitions (the same k for
// every column, keeping the pairing of an interleaved run) and evaluates
// stat on the medians of the columns over the draw. The value is stat of
// the medians of all repetitions.
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

// ratioCI is the ratio of medians a/b with its paired interval.
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
