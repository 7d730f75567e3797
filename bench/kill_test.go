//go:build linux

package main

import "testing"

// The kill goals judge the 99th percentile of the kill-to-grant latency,
// not the median or the worst.
func TestKillGoalsUseP99(t *testing.T) {
	lat := func(subject string, p50, p99, worst int64) *row {
		r := &row{Subject: subject, Baton: true}
		for range 3 {
			r.Samples = append(r.Samples, sample{Ops: 10, P50: p50, P99: p99, Max: worst, WorstWait: worst})
		}
		return r
	}
	res := &results{Tables: []*table{
		synthTable("rw-kill", nil, lat("baton local/shm", 1e6, 4e6, 9e6)),
		synthTable("sem-kill", nil, lat("baton local/shm", 1e6, 6e6, 6e6)),
	}}
	grs := checkGoals(res)
	if g := goalOf(t, grs, "RWMutex, writer SIGKILLed"); g.Verdict != verdictMet || g.Measured.Value != 4e6 {
		t.Errorf("rw-kill: %+v", g)
	}
	if g := goalOf(t, grs, "Semaphore, permit holder SIGKILLed"); g.Verdict != verdictNotMet || g.Measured.Value != 6e6 {
		t.Errorf("sem-kill: %+v", g)
	}
}
