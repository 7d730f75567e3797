//go:build linux

package mutex

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
	"golang.org/x/sys/unix"
)

// Mutex is one handle on a futex mutex (see the package documentation of
// the mechanism in mutex.go). It implements driver.Lock for exclusive
// mode. As the driver contract allows, one handle runs at most one call at a
// time and holds at most one grant; open several handles (or use the
// baton core) for several goroutines.
//
// The zero value is not usable; use Open.
type Mutex struct {
	r    *ipc.Region  // the words are at the off* offsets; released at Close, unmapped once unreachable
	me   uint64       // this handle's state pattern: tag<<32 | handle<<handleShift | pid
	loss *driver.Loss // the handle's: fired when its file is removed or replaced
	wl   word.Lock    // the word path, when onWord
	gone atomic.Bool  // set before loss fires; read by the fast path
	// onWord: the handle has a handle field, and so the word path.
	onWord bool
	// The fields below are used only by the call in progress (one at a
	// time), or by the file watch.
	closed bool
	tok    uint64      // the token of the last grant given, until released
	waiter *ipc.Waiter // the sleep of Acquire, which watches the owner; made at its first wait
	fileW  ipc.Watch
}

var (
	_ driver.Lock       = (*Mutex)(nil)
	_ driver.WordLocker = (*Mutex)(nil)
)

// Open opens the futex mutex called name in ns, creating it unlocked
// when it does not exist. The name is validated before anything is created.
func Open(ns *ipc.Namespace, name string) (*Mutex, error) {
	return ipc.Open(ns, Kind, name, OpenEntry)
}

// OpenEntry is Open for a name already resolved in its namespace
// (ipc.Namespace.Resolve with Kind), which is not checked or encoded again.
func OpenEntry(e ipc.Entry) (*Mutex, error) {
	r, self, err := shm.OpenEntry(e, Kind, &layout, what, pidBits)
	if err != nil {
		return nil, err
	}
	m := &Mutex{r: r}
	bits := r.TakeField()
	m.me = uint64(self.Tag()&tagMask)<<32 | bits<<handleShift | uint64(self.PID)
	// A handle whose file is removed or replaced (Remove, baton rm)
	// keeps a mapping that no new opener shares: its holds are not
	// exclusive any more, then or later. The watcher fires the handle's
	// loss, which every grant of the handle carries.
	m.loss = driver.NewLoss()
	if bits != 0 {
		m.wl, m.onWord = word.Make(m.state(), m.fence(), m.slot(), &m.gone, shm.RaceSync(r.DevIno()), ownerMask, m.me), true
	}
	// The memory stays mapped, and the handle bits taken, until the handle
	// is unreachable, not just closed: the core may still be taking or
	// giving back the word.
	runtime.AddCleanup(m, func(c handleCleanup) {
		c.r.PutField(c.bits)
		c.r.Close()
	}, handleCleanup{r, bits})
	m.fileW.Start(m, m.loss)
	return m, nil
}

// handleCleanup is what an unreachable handle gives back.
type handleCleanup struct {
	r    *ipc.Region
	bits uint64
}

// The words of the mapping. The futex word is the low half of the state.
func (m *Mutex) state() *word.Uint64 { return (*word.Uint64)(unsafe.Add(m.r.Base(), offState)) }
func (m *Mutex) word() *uint32       { return (*uint32)(unsafe.Add(m.r.Base(), offWord)) }
func (m *Mutex) fence() *uint64      { return (*uint64)(unsafe.Add(m.r.Base(), offFence)) }
func (m *Mutex) wait() *word.Int32   { return (*word.Int32)(unsafe.Add(m.r.Base(), offWaiters)) }
func (m *Mutex) slot() *uint64       { return (*uint64)(unsafe.Add(m.r.Base(), offSlot)) }
func (m *Mutex) handoffAt() *word.Int64 {
	return (*word.Int64)(unsafe.Add(m.r.Base(), offHandoffAt))
}

// handoffWait returns how much longer a handoff seen now stays reserved
// for the waiters that have slept; 0 once it is void. The waiter it was
// meant for may have been killed between its wake-up and its claim, and
// nothing else would wake the others.
func (m *Mutex) handoffWait() time.Duration {
	return time.Duration(m.handoffAt().Load() + int64(handoffGrace) - monoNow())
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

var offWord = func() int {
	if nativeBigEndian {
		return offState + 4
	}
	return offState
}()

var nativeBigEndian = func() bool {
	var x uint16 = 1
	b := (*[2]byte)(unsafe.Pointer(&x))
	return binary.BigEndian.Uint16(b[:]) == 1
}()

// Acquire takes the lock in Exclusive mode (Shared is refused with
// ErrUnsupported), waiting until it is free or its owner is found dead, or
// until ctx is done: then it returns an error matching ctx.Err() at once
// and holds nothing.
func (m *Mutex) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if err := m.check(mode); err != nil {
		return driver.Grant{}, err
	}
	if s := m.state().Load(); s&^word.TokenMask == 0 && m.state().CompareAndSwap(s, s|m.me) {
		return m.granted(s, false), nil
	}
	return m.lockSlow(ctx)
}

// TryAcquire takes the lock if it is free, or if its owner is dead (the
// grant then reports Recovered), and otherwise returns an error matching
// baton.ErrLocked. A lock being handed to a waiter that has slept counts as
// taken.
func (m *Mutex) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if err := m.check(mode); err != nil {
		return driver.Grant{}, err
	}
	if s := m.state().Load(); s&^word.TokenMask == 0 && m.state().CompareAndSwap(s, s|m.me) {
		return m.granted(s, false), nil
	}
	for range maxTryAgain {
		s := m.state().Load()
		lo := uint32(s)
		switch {
		case lo&fHandoff != 0 && m.wait().Load() > 0 && m.handoffWait() > 0:
			return driver.Grant{}, baton.ErrLocked
		case lo&fHandoff != 0:
			// Nobody waits any more, or the handoff is stale: it is void.
			if m.state().CompareAndSwap(s, s&word.TokenMask|m.me|fWaiters) {
				return m.granted(s, false), nil
			}
		case lo&pidMask == 0:
			if m.state().CompareAndSwap(s, s&word.TokenMask|m.me|uint64(lo&fWaiters)) {
				return m.granted(s, false), nil
			}
		case m.ownerGone(s):
			if next := m.next(s) | m.me | fWaiters; m.state().CompareAndSwap(s, next) {
				return m.granted(next, true), nil
			}
		default:
			return driver.Grant{}, baton.ErrLocked
		}
	}
	return driver.Grant{}, baton.ErrLocked
}

func (m *Mutex) check(mode driver.Mode) error {
	if m.closed {
		return baton.ErrClosed
	}
	if mode != driver.Exclusive {
		return fmt.Errorf("%s mode: %w", mode, baton.ErrUnsupported)
	}
	return nil
}

func (m *Mutex) lockSlow(ctx context.Context) (driver.Grant, error) {
	m.wait().Add(1)
	defer m.wait().Add(-1)
	if m.waiter == nil {
		m.waiter = new(ipc.Waiter)
	}
	// The watches end with the call: a watch keeps its Waiter reachable.
	defer m.waiter.Close()
	var (
		start time.Time
		slept bool
		spins int
		grace time.Duration // > 0: a handoff for others is pending
		done  = ctx.Done()
	)
	if done != nil {
		// Cancellation rings this waiter only.
		stop := context.AfterFunc(ctx, m.waiter.Ring)
		defer stop()
	}
	for {
		if done != nil {
			select {
			case <-done:
				return driver.Grant{}, m.abandon(ctx, slept)
			default:
			}
		}
		s := m.state().Load()
		lo := uint32(s)
		switch {
		case lo&(pidMask|fHandoff) == 0: // free
			next := s&word.TokenMask | m.me | uint64(lo&fWaiters)
			if slept {
				next |= fWaiters // others may sleep too
			}
			if m.state().CompareAndSwap(s, next) {
				return m.granted(s, false), nil
			}
			continue
		case lo&fHandoff != 0:
			grace = 0
			if !slept && m.wait().Load() > 1 {
				grace = max(m.handoffWait(), 0)
			}
			if grace == 0 {
				if m.state().CompareAndSwap(s, s&word.TokenMask|m.me|fWaiters) {
					return m.granted(s, false), nil
				}
				continue
			}
		case spins < maxSpin && !slept:
			// The holder may be about to unlock: a system call costs
			// more than a short spin.
			spins++
			if spins%16 == 0 {
				runtime.Gosched()
			}
			continue
		}
		if start.IsZero() {
			start = time.Now()
		}
		want := lo | fWaiters
		if lo&pidMask != 0 && time.Since(start) > starveAfter {
			want |= fStarving
		}
		if want != lo {
			ns := s&^lowHalf | uint64(want)
			if !m.state().CompareAndSwap(s, ns) {
				continue
			}
			s, lo = ns, want
		}
		if lo&pidMask != 0 && m.ownerDead(s) {
			if next := m.next(s) | m.me | fWaiters; m.state().CompareAndSwap(s, next) {
				return m.granted(next, true), nil
			}
			continue
		}
		// The owner is watched: its death ends the sleep as an unlock does.
		// A pending handoff is waited out, not slept on: its claim wakes
		// nobody.
		var err error
		if lo&fHandoff != 0 && grace > 0 {
			err = m.waiter.SleepFor(m.word(), lo, grace)
		} else {
			err = m.waiter.Sleep(m.word(), lo)
		}
		if err != nil {
			m.abandon(ctx, slept)
			return driver.Grant{}, err
		}
		slept = true
	}
}

// abandon leaves the slow path without the lock. A waiter that has slept may
// have consumed a wake-up or been the one a handoff was meant for: it opens
// the handoff to anyone and passes the wake-up on.
func (m *Mutex) abandon(ctx context.Context, slept bool) error {
	alone := m.wait().Load() == 1
	for {
		s := m.state().Load()
		lo := uint32(s)
		var next uint64
		switch {
		case lo&fHandoff != 0 && slept:
			next = s&word.TokenMask | fWaiters // a handoff this waiter may have been meant for
		case lo&fStarving != 0 && alone:
			next = s &^ fStarving // no starving waiter is left
		default:
			next = s
		}
		if next == s || m.state().CompareAndSwap(s, next) {
			break
		}
	}
	if slept {
		ipc.FutexWake(m.word(), 1)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// ownerDead reports whether the owner recorded in state s has died (see
// ProcWatch.Dead), and otherwise watches it: the waiter's next sleep ends
// when it exits. Errors reading /proc count as alive: taking a lock from a
// live owner is worse than waiting.
func (m *Mutex) ownerDead(s uint64) bool {
	pid := int(uint32(s) & pidMask)
	if pid == int(uint32(m.me)&pidMask) {
		return uint32(s>>32)&tagMask != uint32(m.me>>32) // a process that had our pid before us
	}
	return m.waiter.WatchTag(pid, uint32(s>>32), tagMask)
}

// ownerGone is ownerDead for a caller that will not sleep: it watches
// nothing.
func (m *Mutex) ownerGone(s uint64) bool {
	self := ipc.Proc{PID: int(uint32(m.me) & pidMask), Start: m.me >> 32}
	return self.OutlivedTag(int(uint32(s)&pidMask), uint32(s>>32), tagMask)
}

// Release unlocks the grant g. If the lock is no longer g's (another handle
// holds it, or another process took it over, believing this one dead), it
// returns an error matching baton.ErrLost and changes nothing. Release
// works after Close too (see driver.WordLocker).
//
// The word names the handle, so a handle with handle bits need not compare
// tokens (the fence may have moved past a hold's token: see word.Lock).
// Handles without bits share one pattern in this process; each compares g
// with the grant it was last given.
func (m *Mutex) Release(ctx context.Context, g driver.Grant) error {
	if !m.onWord && uint64(g.Token) != m.tok {
		return fmt.Errorf("token %d: %w", g.Token, baton.ErrLost)
	}
	var err error
	if s := m.state().Load(); s&^word.TokenMask != m.me || !m.state().CompareAndSwap(s, m.next(s)) {
		err = m.unlockSlow(g)
	}
	if err == nil && !m.onWord {
		m.tok = 0
	}
	if err == nil && m.gone.Load() {
		// Unlocked a word nobody else opens any more.
		return fmt.Errorf("token %d: %w", g.Token, m.loss.Err())
	}
	return err
}

func (m *Mutex) unlockSlow(g driver.Grant) error {
	var (
		bits  uint64 // the token bits after the hold
		moved bool   // bits is set (the base may have moved for it)
	)
	for {
		s := m.state().Load()
		lo := uint32(s)
		if s&ownerMask != m.me {
			return fmt.Errorf("token %d: %w", g.Token, baton.ErrLost)
		}
		if !moved {
			bits, moved = m.next(s), true
		}
		next := bits
		switch {
		case lo&fStarving != 0:
			next |= fHandoff | fWaiters
			m.handoffAt().Store(monoNow())
		case lo&fWaiters != 0 && m.wait().Load() > 1:
			// More than the waiter woken below sleep: the flag stays, so
			// that the next unlock wakes one too, whoever takes the lock
			// meanwhile. Sleepers wake only so (they have no timeout), and
			// one that has waited long must run to ask for a handoff.
			next |= fWaiters
		}
		if m.state().CompareAndSwap(s, next) {
			if lo&fWaiters != 0 {
				n, err := ipc.FutexWake(m.word(), 1)
				if err != nil {
					return err
				}
				if n == 0 && next != bits {
					// Nobody sleeps (the count is approximate: a waiter
					// killed in its wait stays counted): the flag would
					// only take the word path away, and a handoff would
					// be for nobody.
					m.state().CompareAndSwap(next, bits)
				}
			}
			return nil
		}
	}
}

// Downgrade returns an error matching baton.ErrUnsupported: a mutex has no
// shared mode.
func (m *Mutex) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	return driver.Grant{}, fmt.Errorf("downgrade: %w", baton.ErrUnsupported)
}

// Close stops the handle's watchers; Acquire and TryAcquire fail after it.
// A grant still held stays held (a process that exits releases nothing
// either: waiters recover it), and Release still gives it back: the memory
// is unmapped only once the handle is unreachable.
func (m *Mutex) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	// Released first: the file's linger then follows it on the watch
	// this handle leaves, which ends without a system call.
	m.r.Release()
	m.fileW.Stop()
	return nil
}

// WordLock returns the lock word for the baton core (driver.WordLocker). It
// is nil for a handle opened while handleMax others of this process on the
// same name were alive: such a handle is served by Acquire and Release
// only.
func (m *Mutex) WordLock() (*word.Lock, *driver.Loss) {
	if !m.onWord {
		return nil, m.loss
	}
	return &m.wl, m.loss
}
