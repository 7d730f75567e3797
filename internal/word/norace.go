//go:build !race

package word

import "sync/atomic"

// Without the race detector the lock word orders everything; see race.go.
func raceAcquire(p *atomic.Uint64) {}
func raceRelease(p *atomic.Uint64) {}
