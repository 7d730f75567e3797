//go:build linux

package shmrw

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// claim takes a free slot below the bound, else the slot of a dead
// process below it (whatever it held is given back with it), else a free
// slot above it, raising the bound; so the bound, which writers scan up
// to, stays near the most handles ever open at once.
func (l *RW) claim() (int, error) {
	b := int(l.bound.Load())
	for i := range b {
		if p := l.slotAt(i); p.Load() == 0 && p.CompareAndSwap(0, l.me) {
			return i, nil
		}
	}
	for i := range b {
		p := l.slotAt(i)
		if v := p.Load(); v != 0 && l.dead(v) && p.CompareAndSwap(v, l.me) {
			if v&sWrite != 0 {
				ipc.FutexWake(l.word, math.MaxInt32)
			}
			if v&sRead != 0 {
				l.drain.Add(1)
				ipc.FutexWake((*uint32)(unsafe.Pointer(l.drain)), 1)
			}
			return i, nil
		}
	}
	for i := b; i < maxSlots; i++ {
		if p := l.slotAt(i); p.Load() == 0 && p.CompareAndSwap(0, l.me) {
			l.raise(i)
			return i, nil
		}
	}
	return 0, fmt.Errorf("%d handles open: %w", maxSlots, baton.ErrUnsupported)
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
// is worse than waiting.
func (l *RW) dead(v uint64) bool { return l.self.Outlived(int(v&pidMask), uint32(v>>32)) }
