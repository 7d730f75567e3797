//go:build linux

package shmrw

import (
	"fmt"
	"math"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// claim takes a free slot below the bound, else the slot of a dead
// process below it (whatever it held is given back with it), else a free
// slot above it, raising the bound; so the bound, which writers scan up
// to, stays near the most handles ever open at once. Every claim starts a
// new generation of the slot's read count.
func (l *RW) claim() (int, error) {
	b := int(l.bound.Load())
	for i := range b {
		if p := l.slotAt(i); p.Load() == 0 && p.CompareAndSwap(0, l.me) {
			newGen(l.countAt(i))
			return i, nil
		}
	}
	for i := range b {
		p, c := l.slotAt(i), l.countAt(i)
		h := c.Load() // before the owner: see reap
		if v := p.Load(); v != 0 && l.dead(v) && c.CompareAndSwap(h, (h>>32+1)<<32) && p.CompareAndSwap(v, l.me) {
			if v&sWrite != 0 {
				ipc.FutexWake(l.word, math.MaxInt32)
			}
			if v&sRead != 0 || h&countLow != 0 {
				l.wakeDrain()
			}
			return i, nil
		}
	}
	for i := b; i < maxSlots; i++ {
		if p := l.slotAt(i); p.Load() == 0 && p.CompareAndSwap(0, l.me) {
			newGen(l.countAt(i))
			l.raise(i)
			return i, nil
		}
	}
	return 0, fmt.Errorf("%d handles open: %w", maxSlots, baton.ErrUnsupported)
}

// reap frees slot i if its process is dead, giving back what it held, and
// reports whether it did. The count is read before the owner: if the slot
// is claimed again after that read, the claim's new generation makes the
// swap of the count fail; if before, the owner read next is the new, live
// one.
func (l *RW) reap(i int) bool {
	p, c := l.slotAt(i), l.countAt(i)
	h := c.Load()
	v := p.Load()
	if v == 0 || !l.dead(v) {
		return false
	}
	// A new generation even for a count of zero: a thread of the dying
	// process that is still running cannot add to it after.
	if !c.CompareAndSwap(h, (h>>32+1)<<32) {
		return false
	}
	return p.CompareAndSwap(v, 0)
}

func (l *RW) raise(i int) {
	for {
		b := l.bound.Load()
		if uint32(i) < b || l.bound.CompareAndSwap(b, uint32(i+1)) {
			return
		}
	}
}

// dead reports whether the process named by v (tag<<32 | pid, other bits
// ignored) has died. Errors count as alive: taking a live holder's share
// is worse than waiting. In a call that may sleep, a live process is
// watched too, so that its exit ends the sleep.
func (l *RW) dead(v uint64) bool {
	if l.sleeping {
		return l.waiter.Watch(int(v&pidMask), uint32(v>>32))
	}
	return l.self.Outlived(int(v&pidMask), uint32(v>>32))
}
