//go:build linux

package main

import (
	"testing"
	"time"
)

// TestWorkersWindow: a workers' run lasts long enough for each worker to
// do dbqFairJobs at the last run's throughput, within [dur, 4×dur].
func TestWorkersWindow(t *testing.T) {
	const dur = time.Second
	for _, c := range []struct {
		last float64
		want time.Duration
	}{
		{0, dur},                        // no run yet
		{10_000, dur},                   // 16 workers do 100 jobs each in 160 ms
		{800, 2 * time.Second},          // 1,600 jobs at 800/s
		{100, 4 * time.Second},          // 16 s needed: capped
		{1600, 1000 * time.Millisecond}, // exactly dur
	} {
		if got := workersWindow(dur, 16, c.last); got != c.want {
			t.Errorf("workersWindow(%v, 16, %v) = %v, want %v", dur, c.last, got, c.want)
		}
	}
}
