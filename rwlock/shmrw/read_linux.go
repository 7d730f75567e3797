//go:build linux

package shmrw

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// The read side of the lock: readers registered in their handle's slot.

// tryRead is the reader's store-then-load (see the package doc).
func (l *RW) tryRead() bool {
	l.slot.Store(l.me | sRead)
	s := l.state.Load()
	if s&(pidMask|fWW) == 0 {
		return true
	}
	l.leaveRead()
	return false
}

// leaveRead clears the read bit and wakes a draining writer.
func (l *RW) leaveRead() {
	l.slot.Store(l.me)
	if l.state.Load()&fDrain != 0 {
		l.wakeDrain()
	}
}

// wakeDrain wakes the writer that drains readers.
func (l *RW) wakeDrain() {
	l.drain.Add(1)
	ipc.FutexWake((*uint32)(unsafe.Pointer(l.drain)), 1)
}

func (l *RW) readGrant(recovered bool) driver.Grant {
	return driver.Grant{Recovered: recovered, Loss: l.loss, Data: sharedGrant}
}

func (l *RW) rlock(ctx context.Context, wait bool) (driver.Grant, error) {
	if l.tryRead() {
		return l.readGrant(false), nil
	}
	recovered := false
	if !wait {
		for range maxTryAgain {
			s := l.state.Load()
			if s&(pidMask|fWW) == 0 {
				if l.tryRead() {
					return l.readGrant(recovered), nil
				}
				continue
			}
			changed, held := l.recoverWord(s)
			if !changed {
				break
			}
			recovered = recovered || held
		}
		return driver.Grant{}, fmt.Errorf("read: %w", baton.ErrLocked)
	}
	done := ctx.Done()
	if done != nil {
		stop := context.AfterFunc(ctx, l.waiter.Ring)
		defer stop()
	}
	for {
		if done != nil {
			select {
			case <-done:
				return driver.Grant{}, ctx.Err()
			default:
			}
		}
		s := l.state.Load()
		if s&(pidMask|fWW) == 0 {
			if l.tryRead() {
				return l.readGrant(recovered), nil
			}
			continue
		}
		if s&fWaiters == 0 {
			if !l.state.CompareAndSwap(s, s|fWaiters) {
				continue
			}
			s |= fWaiters
		}
		// recoverWord watches the writer, or the waiting writers, that
		// keep this reader out: their exit ends the sleep.
		if changed, held := l.recoverWord(s); changed {
			recovered = recovered || held
			continue
		}
		if err := l.waiter.Sleep(l.word, uint32(s)); err != nil {
			return driver.Grant{}, err
		}
	}
}

// recoverWord frees a state word s whose writer is dead, or clears a
// writer-waiting flag that no live slot confirms. changed reports that
// the word changed; held that a dead writer held the lock (not just
// drained).
func (l *RW) recoverWord(s uint64) (changed, held bool) {
	switch {
	case s&pidMask != 0:
		if !l.dead(s) {
			return false, false
		}
		if !l.state.CompareAndSwap(s, s&(fWW|fWaiters)) {
			return true, false
		}
		ipc.FutexWake(l.word, math.MaxInt32)
		return true, s&fDrain == 0
	case s&fWW != 0:
		if l.writerWaits() {
			return false, false
		}
		return l.state.CompareAndSwap(s, s&^fWW), false
	}
	return false, false
}

// writerWaits reports whether a live slot has the wait bit; it frees the
// slots of dead waiting writers.
func (l *RW) writerWaits() bool {
	for i := range int(l.bound.Load()) {
		p := l.slotAt(i)
		v := p.Load()
		if v&sWrite == 0 {
			continue
		}
		if !l.dead(v) {
			return true
		}
		l.reap(i)
	}
	return false
}
