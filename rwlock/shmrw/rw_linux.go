//go:build linux

package shmrw

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// what names the primitive in errors about its file.
const what = "shared-memory rwlock"

const (
	kind       = "shmrw"
	magic      = 0x62747232 // "btr2"
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

	sRead  = 1 << 22 // slot: holds a read lock (the driver's grant)
	sWrite = 1 << 23 // slot: waits to write

	// The second word of a slot (slotCount) counts the handle's anonymous
	// read holds (word.Readers): generation << 32 | holds.
	slotCount = 8
	countLow  = 0xffffffff

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
	state  *word.Uint64
	word   *uint32 // low half of state
	fence  *uint64
	drain  *word.Uint32
	bound  *word.Uint32
	slots  unsafe.Pointer
	slot   *word.Uint64 // this handle's slot
	count  *word.Uint64 // this handle's read count (slotCount)
	rd     *word.Readers
	idx    int
	me     uint64 // tag<<32 | pid
	self   ipc.Proc
	rsync  *atomic.Uint64 // race-detector edge (race.go)
	freed  *atomic.Bool   // the slot was given back
	closed bool

	// The sleep of a waiting call, and whether one is in progress (then
	// dead watches the processes it checks).
	waiter   ipc.Waiter
	sleeping bool

	loss      *driver.Loss
	gone      atomic.Bool
	stopWatch func()
}

var (
	_ driver.Lock        = (*RW)(nil)
	_ driver.TryFirst    = (*RW)(nil)
	_ driver.ReadCounter = (*RW)(nil)
)

var errRemoved = errors.New("shared-memory rwlock file removed or replaced")

// Open opens the read-write lock called name in ns, creating it free when
// it does not exist. The name is validated before anything is created. It
// fails when maxSlots handles are open on the name already.
func Open(ns *ipc.Namespace, name string) (*RW, error) {
	e, err := ns.Entry(kind, name)
	if err != nil {
		return nil, err
	}
	r, self, err := shm.OpenEntry(e, kind, &layout, what, pidBits)
	if err != nil {
		return nil, err
	}
	l := on(r, name)
	l.self = self
	l.me = uint64(self.Tag())<<32 | uint64(self.PID)
	l.loss = driver.NewLoss()
	if l.idx, l.stopWatch, l.rsync, err = shm.Attach(r, &l.gone, l.loss, errRemoved, l.claim); err != nil {
		return nil, err
	}
	l.slot, l.count = l.slotAt(l.idx), l.countAt(l.idx)
	l.freed = new(atomic.Bool)
	l.rd = word.NewReaders(l.count, l.state, &l.gone, l.rsync, l.wakeDrain, pidMask|fWW, fDrain, l.count.Load())
	// The memory stays mapped until the handle is unreachable; a slot
	// that Close did not free (a grant still held) is freed then.
	runtime.AddCleanup(l, func(c cleanup) {
		if !c.freed.Swap(true) {
			newGen(c.count)
			if v := c.slot.Load(); v&ownerMask == c.me {
				c.slot.CompareAndSwap(v, 0)
			}
		}
		c.r.Close()
	}, cleanup{l.r, l.slot, l.count, l.freed, l.me})
	return l, nil
}

type cleanup struct {
	r           *ipc.Region
	slot, count *word.Uint64
	freed       *atomic.Bool
	me          uint64
}

// newGen starts a new generation of a count word with no holds, and
// returns the holds of the old one.
func newGen(c *word.Uint64) uint64 {
	for {
		v := c.Load()
		if c.CompareAndSwap(v, (v>>32+1)<<32) {
			return v & countLow
		}
	}
}

// ReadCounter returns the handle's count of anonymous read holds
// (driver.ReadCounter) and the Loss of every grant of the handle.
func (l *RW) ReadCounter() (*word.Readers, *driver.Loss) { return l.rd, l.loss }

// layout is the file of a read-write lock: reclaimed at the last close in
// the host when no process holds it (a dead process's hold stays for a
// waiter to recover).
var layout = ipc.Layout{Kind: kind, Size: size, Magic: magic, Fence: offFence, Idle: func(b []byte) bool {
	l := new(RW)
	l.setBase(unsafe.Pointer(&b[0]))
	if l.state.Load()&pidMask != 0 {
		return false
	}
	for i := range int(min(l.bound.Load(), maxSlots)) {
		if l.slotAt(i).Load()&sRead != 0 || l.countAt(i).Load()&countLow != 0 {
			return false
		}
	}
	return true
}}

func on(r *ipc.Region, name string) *RW {
	l := &RW{name: name, r: r}
	l.setBase(unsafe.Pointer(&r.Bytes()[0]))
	return l
}

func (l *RW) setBase(base unsafe.Pointer) {
	l.state = (*word.Uint64)(unsafe.Add(base, offState))
	l.word = (*uint32)(unsafe.Add(base, offState+lowOffset))
	l.fence = (*uint64)(unsafe.Add(base, offFence))
	l.drain = (*word.Uint32)(unsafe.Add(base, offDrain))
	l.bound = (*word.Uint32)(unsafe.Add(base, offBound))
	l.slots = unsafe.Add(base, offSlots)
}

// lowOffset is where the low half of a uint64 lies in memory.
var lowOffset = func() uintptr {
	x := uint64(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return 0
	}
	return 4
}()

func (l *RW) slotAt(i int) *word.Uint64 {
	return (*word.Uint64)(unsafe.Add(l.slots, i*slotStride))
}

func (l *RW) countAt(i int) *word.Uint64 {
	return (*word.Uint64)(unsafe.Add(l.slots, i*slotStride+slotCount))
}

// Acquire takes the lock in mode, waiting until it can, or until ctx is
// done: then it returns an error matching ctx.Err() at once and holds
// nothing.
func (l *RW) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	if mode == driver.Shared && !l.closed {
		// tryRead spelled out.
		l.slot.Store(l.me | sRead)
		if l.state.Load()&(pidMask|fWW) == 0 {
			shm.RaceAcquire(l.rsync)
			return driver.Grant{Loss: l.loss, Data: sharedGrant}, nil
		}
		l.leaveRead()
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
		return driver.Grant{}, baton.ErrClosed
	}
	var (
		g   driver.Grant
		err error
	)
	if wait {
		// The watches end with the call: a watch keeps its Waiter, and
		// with it the handle, reachable.
		l.sleeping = true
		defer func() { l.sleeping = false; l.waiter.Close() }()
	}
	if mode == driver.Shared {
		g, err = l.rlock(ctx, wait)
	} else {
		g, err = l.wlock(ctx, wait)
	}
	if err == nil {
		shm.RaceAcquire(l.rsync)
	}
	return g, err
}

// Release gives back grant g. A grant that is no longer this handle's (its
// share was taken over) gives an error matching baton.ErrLost and changes
// nothing.
func (l *RW) Release(ctx context.Context, g driver.Grant) error {
	shm.RaceRelease(l.rsync)
	switch g.Data {
	case sharedGrant:
		if !l.slot.CompareAndSwap(l.me|sRead, l.me) {
			return fmt.Errorf("read: %w", baton.ErrLost)
		}
		if l.state.Load()&fDrain != 0 {
			l.wakeDrain()
		}
	case exclusiveGrant:
		if !l.state.CompareAndSwap(l.me, 0) && !l.unlockWord() {
			return fmt.Errorf("token %d: %w", g.Token, baton.ErrLost)
		}
	default:
		return fmt.Errorf("%w: grant of another driver", baton.ErrInvalidArgument)
	}
	if l.gone.Load() {
		return l.loss.Err()
	}
	return nil
}

// Downgrade turns the write grant g into a read grant atomically: the
// handle's read bit is set before the writer leaves the word. The read
// grant keeps g's token.
func (l *RW) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	if g.Data != exclusiveGrant {
		return driver.Grant{}, fmt.Errorf("downgrade of a read lock: %w", baton.ErrNotHeld)
	}
	if l.state.Load()&ownerMask != l.me {
		return driver.Grant{}, fmt.Errorf("token %d: %w", g.Token, baton.ErrLost)
	}
	l.slot.Store(l.me | sRead)
	if !l.unlockWord() {
		l.slot.Store(l.me)
		return driver.Grant{}, fmt.Errorf("token %d: %w", g.Token, baton.ErrLost)
	}
	return driver.Grant{Token: g.Token, Loss: l.loss, Data: sharedGrant}, nil
}

// Close gives back the read holds counted in the handle's slot, frees the
// slot and stops its watcher; Acquire and TryAcquire fail after it. The
// core gives back any grant first (a slot that still holds one is freed
// when the handle is unreachable).
func (l *RW) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	if l.stopWatch != nil {
		l.stopWatch()
	}
	if l.freed.Load() {
		l.r.Release()
		return nil
	}
	if newGen(l.count) != 0 && l.state.Load()&fDrain != 0 {
		l.wakeDrain()
	}
	if l.slot.Load() == l.me && !l.freed.Swap(true) {
		l.slot.CompareAndSwap(l.me, 0)
	}
	if l.freed.Load() {
		l.r.Release() // else the cleanup releases, once it freed the slot
	}
	return nil
}
