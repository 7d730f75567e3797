//go:build race

package mutex

import (
	"sync"
	"sync/atomic"
)

var raceSyncs sync.Map // [2]uint64{dev, ino} → *atomic.Uint64

// raceSync returns the race-detector word (word.New) of the lock file dev/ino:
// one per file and process, so that every handle of the process on the
// lock shares it.
func raceSync(dev, ino uint64) *atomic.Uint64 {
	p, _ := raceSyncs.LoadOrStore([2]uint64{dev, ino}, new(atomic.Uint64))
	return p.(*atomic.Uint64)
}
