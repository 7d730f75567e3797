//go:build !race

package word

import "sync/atomic"

// Without the race detector the lock word orders everything; see race.go.
func raceAcquire(p *atomic.Uint64) {}
func raceRelease(p *atomic.Uint64) {}

// Without the race detector sync/atomic's Store is sequentially consistent.
func store64(p *atomic.Uint64, v uint64) { p.Store(v) }
func store32(p *atomic.Uint32, v uint32) { p.Store(v) }
func storeI64(p *atomic.Int64, v int64)  { p.Store(v) }
func storeI32(p *atomic.Int32, v int32)  { p.Store(v) }
