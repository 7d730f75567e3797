//go:build linux

package main

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// hist is a log-linear latency histogram: 16 sub-buckets per power of two,
// so a reported percentile is within about 6% of the true value; the maximum
// is kept exactly. The zero value is empty and ready. Not safe for
// concurrent use: each goroutine records into its own and they are merged.
type hist struct {
	counts [64 * 16]uint64
	n      uint64
	max    int64
}

const subBits = 4

func bucketOf(v int64) int {
	if v < 16 {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	e := 63 - bits.LeadingZeros64(uint64(v)) // v in [2^e, 2^(e+1))
	sub := int((uint64(v) >> (e - subBits)) & 15)
	return (e-subBits+1)*16 + sub
}

// bucketMid returns a representative value (the middle) of bucket b.
func bucketMid(b int) int64 {
	if b < 16 {
		return int64(b)
	}
	e := b/16 + subBits - 1
	sub := int64(b % 16)
	lo := (int64(1) << e) + sub<<(e-subBits)
	return lo + (int64(1)<<(e-subBits))/2
}

func (h *hist) add(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	if o.max > h.max {
		h.max = o.max
	}
}

// quantile returns the q-quantile (0 < q < 1) in nanoseconds, 0 when empty.
func (h *hist) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketMid(i), h.max)
		}
	}
	return h.max
}

// sample is what one run of one subject measured. Durations are in
// nanoseconds so that the JSON file needs no unit conversion.
type sample struct {
	Ops        int64   `json:"ops"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput_per_s"`
	P50        int64   `json:"p50_ns"`
	P99        int64   `json:"p99_ns"`
	Max        int64   `json:"max_ns"`
	WorstWait  int64   `json:"worst_wait_ns"`
	CPUPerOp   int64   `json:"cpu_per_op_ns"`
	// Fairness is the fewest acquisitions of one contender divided by the
	// most (1 = equal shares); 0 when not measured.
	Fairness float64 `json:"fairness,omitempty"`
	// Bytes is the memory figure of the memory workloads.
	Bytes int64 `json:"bytes,omitempty"`
	// Left and LeftAfterWait are the objects (keys, rows, znodes) that the
	// residue runs of network backends leave, right after the last Close
	// and after waiting for the backend to give them back; Bytes is then
	// the growth of the server's memory, -1 where it reports none.
	Left          int64 `json:"left,omitempty"`
	LeftAfterWait int64 `json:"left_after_wait,omitempty"`
}

// summary is the median and range of one figure over the repetitions.
type summary struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func summarize(vals []float64) summary {
	if len(vals) == 0 {
		return summary{}
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	var med float64
	if len(s)%2 == 1 {
		med = s[len(s)/2]
	} else {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{Median: med, Min: s[0], Max: s[len(s)-1]}
}

func durNs(n int) time.Duration { return time.Duration(n) }
