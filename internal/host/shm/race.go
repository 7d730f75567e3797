//go:build race

package shm

import (
	"sync"
	"sync/atomic"
)

var syncs sync.Map // [2]uint64{dev, ino} → *atomic.Uint64

// RaceSync returns the race-detector word of the file dev/ino, one per file and
// process.
func RaceSync(dev, ino uint64) *atomic.Uint64 {
	p, _ := syncs.LoadOrStore([2]uint64{dev, ino}, new(atomic.Uint64))
	return p.(*atomic.Uint64)
}

// RaceAcquire is called after a grant, RaceRelease before a hold is given back.
func RaceAcquire(p *atomic.Uint64) { p.Load() }
func RaceRelease(p *atomic.Uint64) { p.Add(1) }
