//go:build race

package shmrw

import (
	"sync"
	"sync/atomic"
)

var raceSyncs sync.Map // [2]uint64{dev, ino} → *atomic.Uint64

// raceSync returns the race-detector word of the lock file dev/ino, one
// per file and process: the detector does not see the ordering that the
// shared mapping's atomics give, so grants add an edge on this word.
func raceSync(dev, ino uint64) *atomic.Uint64 {
	p, _ := raceSyncs.LoadOrStore([2]uint64{dev, ino}, new(atomic.Uint64))
	return p.(*atomic.Uint64)
}

func raceAcquire(p *atomic.Uint64) { p.Load() }
func raceRelease(p *atomic.Uint64) { p.Add(1) }
