//go:build linux

package shmrw

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"golang.org/x/sys/unix"
)

const (
	kind       = "shmrw"
	magic      = 0x62747277 // "btrw"
	offMagic   = 0          // uint32
	offState   = 8          // uint64; its low half is the futex word
	offFence   = 16         // uint64: the last writer token
	offDrain   = 24         // uint32 futex: bumped by readers leaving while a writer drains
	offBound   = 28         // uint32: above every slot ever claimed
	offSlots   = 64
	slotStride = 64 // one cache line per slot
	maxSlots   = 1024
	size       = offSlots + maxSlots*slotStride

	pidBits   = 22
	pidMask   = 1<<pidBits - 1
	fWaiters  = 1 << 22 // someone may sleep on the word: a release wakes all
	fDrain    = 1 << 23 // the writer in the word waits for readers to leave
	fWW       = 1 << 24 // a writer waits (hint; confirmed by slots)
	ownerMask = 0xffffffff_00000000 | pidMask
	lowHalf   = 0xffffffff

	sRead  = 1 << 22 // slot: holds a read lock
	sWrite = 1 << 23 // slot: waits to write

	deadCheck   = time.Millisecond
	maxTryAgain = 8
)

// RW is one handle on a shared-memory read-write lock. It implements
// driver.Lock; as the driver contract allows, one call runs at a time and
// the handle holds at most one grant.
//
// The zero value is not usable; use Open.
type RW struct {
	name   string
	r      *ipc.Region
	state  *atomic.Uint64
	word   *uint32 // low half of state
	fence  *uint64
	drain  *atomic.Uint32
	bound  *atomic.Uint32
	slots  unsafe.Pointer
	slot   *atomic.Uint64 // this handle's slot
	idx    int
	me     uint64 // tag<<32 | pid
	self   ipc.Proc
	rsync  *atomic.Uint64 // race-detector edge (race.go)
	freed  *atomic.Bool   // the slot was given back
	closed bool

	loss      *driver.Loss
	gone      atomic.Bool
	stopWatch func()
}

var (
	_ driver.Lock     = (*RW)(nil)
	_ driver.TryFirst = (*RW)(nil)
)

var errRemoved = errors.New("shared-memory rwlock file removed or replaced")

// Open opens the read-write lock called name in ns, creating it free when
// it does not exist. The name is validated before anything is created. It
// fails when maxSlots handles are open on the name already.
func Open(ns *ipc.Namespace, name string) (*RW, error) {
	if _, err := ns.Path(kind, name); err != nil {
		return nil, err
	}
	self, err := ipc.Self()
	if err != nil {
		return nil, err
	}
	if self.PID > pidMask {
		return nil, fmt.Errorf("shmrw: pid %d does not fit in %d bits: %w", self.PID, pidBits, baton.ErrUnsupported)
	}
	r, err := ipc.OpenRegion(ns, kind, name, size)
	if err != nil {
		return nil, err
	}
	l := on(r, name)
	l.self = self
	l.me = uint64(self.Tag())<<32 | uint64(self.PID)
	if err := l.checkMagic(); err != nil {
		r.Close()
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat(r.Path(), &st); err != nil {
		r.Close()
		return nil, l.errf("%w", err)
	}
	if l.idx, err = l.claim(); err != nil {
		r.Close()
		return nil, err
	}
	l.slot = l.slotAt(l.idx)
	l.rsync = raceSync(uint64(st.Dev), st.Ino)
	l.freed = new(atomic.Bool)
	path, dev, ino := r.Path(), uint64(st.Dev), st.Ino
	l.loss = driver.NewLoss()
	l.stopWatch = ipc.WatchLoss(func() error {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil || uint64(st.Dev) != dev || st.Ino != ino {
			l.gone.Store(true)
			return errRemoved
		}
		return nil
	}, l.loss)
	// The memory stays mapped until the handle is unreachable; a slot
	// that Close did not free (a grant still held) is freed then.
	runtime.AddCleanup(l, func(c cleanup) {
		if !c.freed.Swap(true) {
			if v := c.slot.Load(); v&ownerMask == c.me {
				c.slot.CompareAndSwap(v, 0)
			}
		}
		c.r.Close()
	}, cleanup{l.r, l.slot, l.freed, l.me})
	return l, nil
}

type cleanup struct {
	r     *ipc.Region
	slot  *atomic.Uint64
	freed *atomic.Bool
	me    uint64
}

func on(r *ipc.Region, name string) *RW {
	base := unsafe.Pointer(&r.Bytes()[0])
	return &RW{
		name:  name,
		r:     r,
		state: (*atomic.Uint64)(unsafe.Add(base, offState)),
		word:  (*uint32)(unsafe.Add(base, offState+lowOffset)),
		fence: (*uint64)(unsafe.Add(base, offFence)),
		drain: (*atomic.Uint32)(unsafe.Add(base, offDrain)),
		bound: (*atomic.Uint32)(unsafe.Add(base, offBound)),
		slots: unsafe.Add(base, offSlots),
	}
}

// lowOffset is where the low half of a uint64 lies in memory.
var lowOffset = func() uintptr {
	x := uint64(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return 0
	}
	return 4
}()

func (l *RW) slotAt(i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(l.slots, i*slotStride))
}

func (l *RW) checkMagic() error {
	p := (*atomic.Uint32)(unsafe.Pointer(&l.r.Bytes()[offMagic]))
	if p.CompareAndSwap(0, magic) {
		return nil
	}
	if v := p.Load(); v != magic {
		return fmt.Errorf("%w: %s is not a shared-memory rwlock (magic %#x)", baton.ErrMismatch, l.r.Path(), v)
	}
	return nil
}

func (l *RW) errf(format string, args ...any) error {
	return fmt.Errorf("shmrw %q: "+format, append([]any{l.name}, args...)...)
}

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
	return 0, l.errf("%d handles open: %w", maxSlots, baton.ErrUnsupported)
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
func (l *RW) dead(v uint64) bool {
	pid, tag := int(v&pidMask), uint32(v>>32)
	if pid == 0 {
		return false
	}
	if pid == l.self.PID {
		return tag != l.self.Tag()
	}
	w, dead, err := ipc.WatchProc(pid, tag)
	if err != nil {
		return false
	}
	w.Close()
	return dead
}

// Acquire takes the lock in mode, waiting until it can, or until ctx is
// done: then it returns an error matching ctx.Err() within about a
// millisecond and holds nothing.
func (l *RW) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if mode == driver.Shared && !l.closed && l.tryRead() {
		raceAcquire(l.rsync)
		return driver.Grant{Loss: l.loss, Data: sharedGrant}, nil
	}
	return l.acquire(ctx, mode, true)
}

// The Data of this driver's grants: pointers, which compare without a call.
var (
	sharedGrant    = &grantMode{driver.Shared}
	exclusiveGrant = &grantMode{driver.Exclusive}
)

type grantMode struct{ mode driver.Mode }

// TryAcquire takes the lock in mode if it can at once (a dead holder's
// share is reclaimed first), and otherwise returns an error matching
// baton.ErrLocked. A reader is refused while a writer waits.
func (l *RW) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return l.acquire(ctx, mode, false)
}

// TryFirst tells the core that TryAcquire costs no more than the first
// step of Acquire.
func (l *RW) TryFirst() bool { return true }

func (l *RW) acquire(ctx context.Context, mode driver.Mode, wait bool) (driver.Grant, error) {
	if l.closed {
		return driver.Grant{}, l.errf("%w", baton.ErrClosed)
	}
	var (
		g   driver.Grant
		err error
	)
	if mode == driver.Shared {
		g, err = l.rlock(ctx, wait)
	} else {
		g, err = l.wlock(ctx, wait)
	}
	if err == nil {
		raceAcquire(l.rsync)
	}
	return g, err
}

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
		l.drain.Add(1)
		ipc.FutexWake((*uint32)(unsafe.Pointer(l.drain)), 1)
	}
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
		return driver.Grant{}, l.errf("read: %w", baton.ErrLocked)
	}
	done := ctx.Done()
	if done != nil {
		stop := context.AfterFunc(ctx, func() { ipc.FutexWake(l.word, math.MaxInt32) })
		defer stop()
	}
	for {
		if done != nil {
			select {
			case <-done:
				return driver.Grant{}, l.errf("%w", ctx.Err())
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
		timedOut, err := ipc.FutexWait(l.word, uint32(s), deadCheck)
		if err != nil {
			return driver.Grant{}, l.errf("%w", err)
		}
		if timedOut && l.state.Load() == s {
			_, held := l.recoverWord(s)
			recovered = recovered || held
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
		p.CompareAndSwap(v, 0)
	}
	return false
}

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
		stop := context.AfterFunc(ctx, func() { ipc.FutexWake(l.word, math.MaxInt32) })
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
				return false, l.errf("write: %w", baton.ErrLocked)
			}
			if l.state.CompareAndSwap(s, l.me|s&(fWW|fWaiters)) {
				return s&fDrain == 0, nil
			}
			continue
		}
		if done != nil {
			select {
			case <-done:
				return false, l.errf("%w", ctx.Err())
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
		timedOut, err := ipc.FutexWait(l.word, uint32(s), deadCheck)
		if err != nil {
			return false, l.errf("%w", err)
		}
		if timedOut && l.state.Load() == s && l.dead(s) {
			if l.state.CompareAndSwap(s, l.me|s&(fWW|fWaiters)) {
				return s&fDrain == 0, nil
			}
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

// readers returns the slots (other than this handle's) with the read bit.
func (l *RW) readers(buf []int) []int {
	for i := range int(l.bound.Load()) {
		if i != l.idx && l.slotAt(i).Load()&sRead != 0 {
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
		p := l.slotAt(i)
		v := p.Load()
		if v&sRead == 0 {
			continue
		}
		if l.dead(v) {
			p.CompareAndSwap(v, 0)
			continue
		}
		live = true
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
			return l.errf("write: %w", baton.ErrLocked)
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
		stop := context.AfterFunc(ctx, func() {
			l.drain.Add(1)
			ipc.FutexWake(dw, math.MaxInt32)
		})
		defer stop()
	}
	for {
		d := l.drain.Load()
		if rs = l.readers(rs[:0]); len(rs) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return l.errf("%w", err)
		}
		timedOut, err := ipc.FutexWait(dw, d, deadCheck)
		if err != nil {
			return l.errf("%w", err)
		}
		if timedOut {
			l.reapReaders(rs)
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

// Release gives back grant g. A grant that is no longer this handle's (its
// share was taken over) gives an error matching baton.ErrLost and changes
// nothing.
func (l *RW) Release(ctx context.Context, g driver.Grant) error {
	raceRelease(l.rsync)
	switch g.Data {
	case sharedGrant:
		if l.slot.Load() != l.me|sRead {
			return l.errf("read: %w", baton.ErrLost)
		}
		l.leaveRead()
	case exclusiveGrant:
		if !l.state.CompareAndSwap(l.me, 0) && !l.unlockWord() {
			return l.errf("token %d: %w", g.Token, baton.ErrLost)
		}
	default:
		return l.errf("%w: grant of another driver", baton.ErrInvalidArgument)
	}
	if l.gone.Load() {
		return l.errf("%w", l.loss.Err())
	}
	return nil
}

// Downgrade turns the write grant g into a read grant atomically: the
// handle's read bit is set before the writer leaves the word. The read
// grant keeps g's token.
func (l *RW) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	if g.Data != exclusiveGrant {
		return driver.Grant{}, l.errf("downgrade of a read lock: %w", baton.ErrNotHeld)
	}
	if l.state.Load()&ownerMask != l.me {
		return driver.Grant{}, l.errf("token %d: %w", g.Token, baton.ErrLost)
	}
	l.slot.Store(l.me | sRead)
	if !l.unlockWord() {
		l.slot.Store(l.me)
		return driver.Grant{}, l.errf("token %d: %w", g.Token, baton.ErrLost)
	}
	return driver.Grant{Token: g.Token, Loss: l.loss, Data: sharedGrant}, nil
}

// Close frees the handle's slot and stops its watcher; Acquire and
// TryAcquire fail after it. The core gives back any grant first.
func (l *RW) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	if l.stopWatch != nil {
		l.stopWatch()
	}
	if l.slot.Load() == l.me && !l.freed.Swap(true) {
		l.slot.CompareAndSwap(l.me, 0)
	}
	return nil
}
