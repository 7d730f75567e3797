package baton

import (
	"context"
	"runtime"
)

// The permit path of semaphore drivers that count permits in shared memory
// (driver.PermitCounter): while no goroutine of the handle queues or waits
// in the driver, Acquire and Release take and give back permits through the
// driver with no handle lock. Permits taken so are counted in fast, not in
// grants; Release takes them from either.
//
// pst counts the permit-path calls in progress, and carries two flags:
// slowBit, set under mu while a goroutine queues or an Acquire is in the
// driver (a new Acquire then queues behind it, which keeps the handle's
// FIFO), and closedBit, set by Close before it waits for the count to drop
// to zero (so no permit-path call runs once the driver is closed).
const (
	slowBit   = 1 << 61
	closedBit = 1 << 62
	pathCount = slowBit - 1
)

// takePermits takes n permits on the permit path. When ok is false nothing
// is held and the caller takes the regular path (which also reports a bad n,
// a done ctx or a closed handle).
func (s *semHandle) takePermits(ctx context.Context, n int64) (hd Hold, ok bool) {
	if n <= 0 || n > s.capacity || !plainCtx(ctx) && (ctx == nil || ctx.Err() != nil) {
		return Hold{}, false
	}
	if s.pst.Load()&(slowBit|closedBit) != 0 {
		return Hold{}, false
	}
	if s.pst.Add(1)&(slowBit|closedBit) == 0 && s.pool.TakePermits(n) {
		s.fast.Add(n)
		ok = true
	}
	s.pst.Add(-1)
	if !ok {
		return Hold{}, false
	}
	return Hold{mode: Shared, loss: s.poolLoss}, true
}

// givePermits gives back n permits taken on the permit path, and reports
// false (giving back nothing) when fewer are counted there or the handle is
// closing: the regular path then decides.
func (s *semHandle) givePermits(n int64) (bool, error) {
	if s.pst.Add(1)&closedBit != 0 {
		s.pst.Add(-1)
		return false, nil
	}
	for {
		f := s.fast.Load()
		if f < n {
			s.pst.Add(-1)
			return false, nil
		}
		if s.fast.CompareAndSwap(f, f-n) {
			break
		}
	}
	err := s.pool.GivePermits(n)
	s.pst.Add(-1)
	return true, err
}

// syncSlow sets or clears slowBit from the queue. Called with mu held.
func (s *semHandle) syncSlow() {
	if s.pool == nil {
		return
	}
	if s.busy || !s.q.empty() {
		s.pst.Or(slowBit)
	} else {
		s.pst.And(^int64(slowBit))
	}
}

// takeCounted moves up to k permits of the permit path to the caller (the
// regular Release, with mu held) and returns how many it moved.
func (s *semHandle) takeCounted(k int64) int64 {
	for {
		f := s.fast.Load()
		m := min(f, k)
		if m <= 0 || s.fast.CompareAndSwap(f, f-m) {
			return max(m, 0)
		}
	}
}

// closePermits stops the permit path and returns the permits it holds.
// Called by Close with mu held: the calls it waits for never take mu.
func (s *semHandle) closePermits() int64 {
	if s.pool == nil {
		return 0
	}
	s.pst.Or(closedBit)
	for s.pst.Load()&pathCount != 0 {
		runtime.Gosched() // a call in progress ends without waiting
	}
	return s.fast.Swap(0)
}
