//go:build linux

package shmrw

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// The writer's side: taking the state word, waiting for another writer,
// draining readers, giving the word back.

func (l *RW) wlock(ctx context.Context, wait bool) (driver.Grant, error) {
	recovered := false
	if !l.state.CompareAndSwap(0, l.me) {
		var err error
		if recovered, err = l.wclaim(ctx, wait); err != nil {
			return driver.Grant{}, err
		}
	}
	if err := l.drainReaders(ctx, wait); err != nil {
		l.unlockWord()
		return driver.Grant{}, err
	}
	t := atomic.LoadUint64(l.fence) + 1
	atomic.StoreUint64(l.fence, t)
	return driver.Grant{Token: t, Recovered: recovered, Loss: l.loss, Data: exclusiveGrant}, nil
}

// wclaim puts this handle's writer into the state word, waiting while
// another writer holds or drains.
func (l *RW) wclaim(ctx context.Context, wait bool) (recovered bool, err error) {
	registered := false
	defer func() {
		if registered {
			l.slot.Store(l.me)
			if err != nil {
				// Readers held back by this writer's flag look again.
				ipc.FutexWake(l.word, math.MaxInt32)
			}
		}
	}()
	done := ctx.Done()
	if wait && done != nil {
		stop := context.AfterFunc(ctx, l.waiter.Ring)
		defer stop()
	}
	for tries := 0; ; tries++ {
		s := l.state.Load()
		if s&pidMask == 0 {
			if l.state.CompareAndSwap(s, l.me|s&(fWW|fWaiters)) {
				if s&fWW != 0 && !l.otherWriterWaits() {
					l.clearFlag(fWW)
				}
				return recovered, nil
			}
			continue
		}
		if !wait {
			if tries >= maxTryAgain || !l.dead(s) {
				return false, fmt.Errorf("write: %w", baton.ErrLocked)
			}
			if l.state.CompareAndSwap(s, l.me|s&(fWW|fWaiters)) {
				return s&fDrain == 0, nil
			}
			continue
		}
		if done != nil {
			select {
			case <-done:
				return false, ctx.Err()
			default:
			}
		}
		if !registered {
			l.slot.Store(l.me | sWrite)
			registered = true
			continue
		}
		if want := s | fWW | fWaiters; want != s {
			if !l.state.CompareAndSwap(s, want) {
				continue
			}
			s = want
		}
		if l.dead(s) { // and otherwise watched: its exit ends the sleep
			if l.state.CompareAndSwap(s, l.me|s&(fWW|fWaiters)) {
				return s&fDrain == 0, nil
			}
			continue
		}
		if err := l.waiter.Sleep(l.word, uint32(s)); err != nil {
			return false, err
		}
	}
}

// otherWriterWaits reports whether a slot other than this handle's has the
// wait bit.
func (l *RW) otherWriterWaits() bool {
	for i := range int(l.bound.Load()) {
		if i != l.idx && l.slotAt(i).Load()&sWrite != 0 {
			return true
		}
	}
	return false
}

// clearFlag clears f in a state word this handle's writer holds.
func (l *RW) clearFlag(f uint64) {
	for {
		s := l.state.Load()
		if s&f == 0 || l.state.CompareAndSwap(s, s&^f) {
			return
		}
	}
}

// readers returns the slots with read holds: another handle's read grant,
// or holds counted by any handle, this one's included (the core takes
// counted holds of this handle's goroutines while it asks for the write
// lock).
func (l *RW) readers(buf []int) []int {
	for i := range int(l.bound.Load()) {
		if i != l.idx && l.slotAt(i).Load()&sRead != 0 || l.countAt(i).Load()&countLow != 0 {
			buf = append(buf, i)
		}
	}
	return buf
}

// reapReaders frees the slots of dead readers among rs and reports
// whether a live reader is left.
func (l *RW) reapReaders(rs []int) bool {
	live := false
	for _, i := range rs {
		if l.slotAt(i).Load()&sRead == 0 && l.countAt(i).Load()&countLow == 0 {
			continue
		}
		if !l.reap(i) {
			live = true
		}
	}
	return live
}

// drainReaders waits, holding the state word, until no reader holds.
func (l *RW) drainReaders(ctx context.Context, wait bool) error {
	var buf [16]int
	rs := l.readers(buf[:0])
	if len(rs) == 0 {
		return nil
	}
	if !wait {
		if l.reapReaders(rs) {
			return fmt.Errorf("write: %w", baton.ErrLocked)
		}
		return nil
	}
	for {
		s := l.state.Load()
		if s&fDrain != 0 || l.state.CompareAndSwap(s, s|fDrain) {
			break
		}
	}
	defer l.clearFlag(fDrain)
	dw := (*uint32)(unsafe.Pointer(l.drain))
	if done := ctx.Done(); done != nil {
		stop := context.AfterFunc(ctx, l.waiter.Ring)
		defer stop()
	}
	for {
		d := l.drain.Load()
		if rs = l.readers(rs[:0]); len(rs) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Dead readers are freed, live ones watched: a reader's exit
		// ends the sleep as its leaving does.
		if !l.reapReaders(rs) {
			continue
		}
		if err := l.waiter.Sleep(dw, d); err != nil {
			return err
		}
	}
}

// unlockWord gives back the state word this handle's writer holds.
func (l *RW) unlockWord() bool {
	for {
		s := l.state.Load()
		if s&ownerMask != l.me {
			return false
		}
		if l.state.CompareAndSwap(s, s&fWW) {
			if s&fWaiters != 0 {
				ipc.FutexWake(l.word, math.MaxInt32)
			}
			return true
		}
	}
}
