package word

import "sync/atomic"

// Words of shared memory. Their methods are sync/atomic's, except that a
// Store is sequentially consistent in every build. Under the race
// detector, sync/atomic's Store to memory outside the Go heap is a plain
// release store, which a later load of another word may overtake; the
// locks of this module order a store to one word before a load of another
// (a reader's slot, then the state word; a writer the other way round),
// and without that order a reader and a writer both get in. A swap is a
// full barrier in every build.

// Uint64 is a 64-bit word of shared memory.
type Uint64 struct{ v atomic.Uint64 }

func (w *Uint64) Load() uint64                      { return w.v.Load() }
func (w *Uint64) Store(v uint64)                    { store64(&w.v, v) }
func (w *Uint64) Swap(v uint64) uint64              { return w.v.Swap(v) }
func (w *Uint64) CompareAndSwap(old, v uint64) bool { return w.v.CompareAndSwap(old, v) }
func (w *Uint64) Add(d uint64) uint64               { return w.v.Add(d) }

// Uint32 is a 32-bit word of shared memory.
type Uint32 struct{ v atomic.Uint32 }

func (w *Uint32) Load() uint32                      { return w.v.Load() }
func (w *Uint32) Store(v uint32)                    { store32(&w.v, v) }
func (w *Uint32) Swap(v uint32) uint32              { return w.v.Swap(v) }
func (w *Uint32) CompareAndSwap(old, v uint32) bool { return w.v.CompareAndSwap(old, v) }
func (w *Uint32) Add(d uint32) uint32               { return w.v.Add(d) }

// Int64 is a signed 64-bit word of shared memory.
type Int64 struct{ v atomic.Int64 }

func (w *Int64) Load() int64                      { return w.v.Load() }
func (w *Int64) Store(v int64)                    { storeI64(&w.v, v) }
func (w *Int64) Swap(v int64) int64               { return w.v.Swap(v) }
func (w *Int64) CompareAndSwap(old, v int64) bool { return w.v.CompareAndSwap(old, v) }
func (w *Int64) Add(d int64) int64                { return w.v.Add(d) }

// Int32 is a signed 32-bit word of shared memory.
type Int32 struct{ v atomic.Int32 }

func (w *Int32) Load() int32                      { return w.v.Load() }
func (w *Int32) Store(v int32)                    { storeI32(&w.v, v) }
func (w *Int32) Swap(v int32) int32               { return w.v.Swap(v) }
func (w *Int32) CompareAndSwap(old, v int32) bool { return w.v.CompareAndSwap(old, v) }
func (w *Int32) Add(d int32) int32                { return w.v.Add(d) }
