//go:build race

package word

import "sync/atomic"

// raceAcquire and raceRelease give the race detector the happens-before
// edge that a lock word outside the Go heap gives the hardware.
func raceAcquire(p *atomic.Uint64) { p.Load() }
func raceRelease(p *atomic.Uint64) { p.Add(1) }

// A store is a swap: see atomic.go.
func store64(p *atomic.Uint64, v uint64) { p.Swap(v) }
func store32(p *atomic.Uint32, v uint32) { p.Swap(v) }
func storeI64(p *atomic.Int64, v int64)  { p.Swap(v) }
func storeI32(p *atomic.Int32, v int32)  { p.Swap(v) }
