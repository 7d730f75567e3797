//go:build race

package word

import "sync/atomic"

// raceAcquire and raceRelease give the race detector the happens-before
// edge that a lock word outside the Go heap gives the hardware.
func raceAcquire(p *atomic.Uint64) { p.Load() }
func raceRelease(p *atomic.Uint64) { p.Add(1) }
