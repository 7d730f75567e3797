//go:build !race

package mutex

import "sync/atomic"

// raceSync: only builds with the race detector use the word (see race.go).
func raceSync(dev, ino uint64) *atomic.Uint64 { return new(atomic.Uint64) }
