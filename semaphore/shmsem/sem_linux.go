//go:build linux

package shmsem

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
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// what names the primitive in errors about its file.
const what = "shared-memory semaphore"

const (
	kind       = "shmsem"
	magic      = 0x62747373 // "btss"
	offMagic   = 0          // uint32
	offCap     = 8          // uint64: the capacity, set by the first opener
	offTickets = 16         // uint64: next ticket << 32 | ticket served
	offBound   = 24         // uint32: above every slot ever claimed
	offStarve  = 28         // uint32: 1 while a head has waited past starveAfter
	offHeadAt  = 32         // uint64: CLOCK_MONOTONIC ns when the served ticket was last served
	offSlots   = 64
	slotStride = 64
	maxSlots   = 1024
	size       = offSlots + maxSlots*slotStride

	// In a slot: ident at +0 (tag<<32 | pid), held at +8 (generation<<32 |
	// count), ticket at +16, and at +24 the futex word its waiter sleeps on,
	// bumped by whoever wakes it.
	slotHeld   = 8
	slotTicket = 16
	slotBell   = 24
	pidBits    = 22
	pidMask    = 1<<pidBits - 1
	countMask  = 0xffffffff
	tTaking    = 1 << 32 // taking a ticket
	tHas       = 1 << 33 // low half: the ticket

	starveAfter = time.Millisecond
	maxSpin     = 64
)

// MaxPermits is the largest capacity.
const MaxPermits = math.MaxInt32

// Sem is one handle on a shared-memory semaphore. It implements
// driver.Semaphore: Acquire and TryAcquire one at a time, Release at any
// time. The zero value is not usable; use Open.
type Sem struct {
	name     string
	capacity int64
	r        *ipc.Region
	tickets  *word.Uint64
	bound    *word.Uint32
	starve   *word.Uint32
	headAt   *word.Int64
	slots    unsafe.Pointer
	ident    *word.Uint64 // this handle's slot
	held     *word.Uint64
	ticket   *word.Uint64
	bell     *word.Uint32
	me       uint64
	self     ipc.Proc
	rsync    *atomic.Uint64
	freed    *atomic.Bool
	closed   atomic.Bool
	waiter   ipc.Waiter    // the sleep of Acquire; it watches whom it waits on
	kicked   atomic.Uint64 // 1<<32 | the head last kicked by kickHeadOnce

	loss      *driver.Loss
	gone      atomic.Bool
	stopWatch func()
}

var (
	_ driver.Semaphore     = (*Sem)(nil)
	_ driver.PermitCounter = (*Sem)(nil)
)

var errRemoved = errors.New("shared-memory semaphore file removed or replaced")

// Open opens the semaphore called name in ns, creating it with permits
// permits (1 to MaxPermits) when it does not exist. Bad arguments give
// errors matching baton.ErrInvalidName or baton.ErrInvalidArgument and
// create nothing; an existing semaphore of another capacity gives an error
// matching baton.ErrMismatch.
func Open(ns *ipc.Namespace, name string, permits int64) (*Sem, error) {
	e, err := ns.Entry(kind, name)
	if err != nil {
		return nil, err
	}
	if err := baton.ValidatePermits(permits, 0); err != nil {
		return nil, err
	}
	if permits > MaxPermits {
		return nil, fmt.Errorf("%w: %d permits, at most %d", baton.ErrInvalidArgument, permits, MaxPermits)
	}
	r, self, err := shm.OpenEntry(e, kind, &layout, what, pidBits)
	if err != nil {
		return nil, err
	}
	s := on(r, name)
	s.capacity = permits
	s.self = self
	s.me = uint64(self.Tag())<<32 | uint64(self.PID)
	if err := s.checkCapacity(); err != nil {
		r.Close()
		return nil, err
	}
	s.loss = driver.NewLoss()
	idx, stop, rsync, err := shm.Attach(r, &s.gone, s.loss, errRemoved, s.claim)
	if err != nil {
		return nil, err
	}
	s.stopWatch, s.rsync = stop, rsync
	s.ident, s.held, s.ticket = s.slotAt(idx)
	s.bell = s.bellAt(idx)
	s.freed = new(atomic.Bool)
	// The memory stays mapped until the handle is unreachable; a slot that
	// Close did not free (permits still held) is given back then, as the
	// end of the process would.
	runtime.AddCleanup(s, func(c cleanup) {
		if !c.freed.Swap(true) {
			free(c.ident, c.held, c.ticket, c.me)
		}
		c.r.Close()
	}, cleanup{r, s.ident, s.held, s.ticket, s.freed, s.me})
	return s, nil
}

type cleanup struct {
	r                   *ipc.Region
	ident, held, ticket *word.Uint64
	freed               *atomic.Bool
	me                  uint64
}

// layout is the file of a semaphore: reclaimed at the last close in the
// host when no process holds permits (a dead process's stay for a waiter
// to recover); the capacity goes with it, and the next opener sets it.
var layout = ipc.Layout{Kind: kind, Size: size, Magic: magic, Idle: func(b []byte) bool {
	s := onBase(unsafe.Pointer(&b[0]))
	for i := range int(min(s.bound.Load(), maxSlots)) {
		if _, held, _ := s.slotAt(i); held.Load()&countMask != 0 {
			return false
		}
	}
	return true
}}

func on(r *ipc.Region, name string) *Sem {
	s := onBase(unsafe.Pointer(&r.Bytes()[0]))
	s.name, s.r = name, r
	return s
}

func onBase(base unsafe.Pointer) *Sem {
	return &Sem{
		tickets: (*word.Uint64)(unsafe.Add(base, offTickets)),
		bound:   (*word.Uint32)(unsafe.Add(base, offBound)),
		starve:  (*word.Uint32)(unsafe.Add(base, offStarve)),
		headAt:  (*word.Int64)(unsafe.Add(base, offHeadAt)),
		slots:   unsafe.Add(base, offSlots),
	}
}

func (s *Sem) slotAt(i int) (ident, held, ticket *word.Uint64) {
	p := unsafe.Add(s.slots, i*slotStride)
	return (*word.Uint64)(p), (*word.Uint64)(unsafe.Add(p, slotHeld)), (*word.Uint64)(unsafe.Add(p, slotTicket))
}

func (s *Sem) bellAt(i int) *word.Uint32 {
	return (*word.Uint32)(unsafe.Add(s.slots, i*slotStride+slotBell))
}

// checkCapacity sets the capacity of a new semaphore and checks that of
// an existing one.
func (s *Sem) checkCapacity() error {
	c := (*word.Uint64)(unsafe.Pointer(&s.r.Bytes()[offCap]))
	if c.CompareAndSwap(0, uint64(s.capacity)) {
		return nil
	}
	if v := c.Load(); v != uint64(s.capacity) {
		return &baton.MismatchError{Param: "capacity", Have: int64(v), Want: s.capacity}
	}
	return nil
}

// claim takes a free slot below the bound, else the slot of a dead
// process below it (giving back what the dead held), else a free slot
// above it, raising the bound; so the bound, which every acquisition scans
// up to, stays near the most handles ever open at once.
func (s *Sem) claim() (int, error) {
	b := int(s.bound.Load())
	for i := range b {
		if id, _, _ := s.slotAt(i); id.Load() == 0 && id.CompareAndSwap(0, s.me) {
			return s.claimed(i), nil
		}
	}
	for i := range b {
		id, held, ticket := s.slotAt(i)
		h, t := held.Load(), ticket.Load() // before the ident: see reclaimDead
		v := id.Load()
		if v == 0 || !s.dead(v) {
			continue
		}
		if !held.CompareAndSwap(h, (h>>32+1)<<32) {
			continue
		}
		if h&countMask != 0 {
			s.kick()
		}
		ticket.CompareAndSwap(t, 0)
		if id.CompareAndSwap(v, s.me) {
			return s.claimed(i), nil
		}
	}
	for i := b; i < maxSlots; i++ {
		if id, _, _ := s.slotAt(i); id.Load() == 0 && id.CompareAndSwap(0, s.me) {
			return s.claimed(i), nil
		}
	}
	return 0, fmt.Errorf("%d handles open: %w", maxSlots, baton.ErrUnsupported)
}

// claimed starts a new generation of slot i's count, now this handle's,
// and raises the bound above it.
func (s *Sem) claimed(i int) int {
	_, held, ticket := s.slotAt(i)
	held.Store((held.Load()>>32 + 1) << 32)
	ticket.Store(0)
	for {
		b := s.bound.Load()
		if uint32(i) < b || s.bound.CompareAndSwap(b, uint32(i+1)) {
			return i
		}
	}
}

// free gives back what the slot of the handle me holds and frees the slot.
func free(ident, held, ticket *word.Uint64, me uint64) {
	for {
		h := held.Load()
		if held.CompareAndSwap(h, (h>>32+1)<<32) {
			break
		}
	}
	ticket.Store(0)
	ident.CompareAndSwap(me, 0)
}

// dead reports whether the process named by v (tag<<32 | pid) has died.
// Errors count as alive.
func (s *Sem) dead(v uint64) bool { return s.self.Outlived(int(v&pidMask), uint32(v>>32)) }

// reclaimDead frees the slots of dead processes that hold permits or
// tickets, and reports whether it freed any.
func (s *Sem) reclaimDead() bool {
	any := false
	for i := range int(s.bound.Load()) {
		id, held, ticket := s.slotAt(i)
		// The count first: if the slot is claimed again after this read,
		// the claim's new generation makes the swap below fail; if before,
		// the ident read next is the new, live owner.
		h, t := held.Load(), ticket.Load()
		if betweenReads != nil {
			betweenReads(i)
		}
		v := id.Load()
		if v == 0 || h&countMask == 0 && t == 0 || !s.dead(v) {
			continue
		}
		if held.CompareAndSwap(h, (h>>32+1)<<32) {
			any = true
		}
		if t != 0 {
			ticket.CompareAndSwap(t, 0)
		}
		id.CompareAndSwap(v, 0)
	}
	if any {
		s.kick()
	}
	return any
}

// betweenReads, when set by a test, runs in reclaimDead between its read
// of a slot's count and its read of the slot's owner.
var betweenReads func(slot int)

// Capacity returns the number of permits of the semaphore.
func (s *Sem) Capacity() int64 { return s.capacity }

// sum returns the permits in use: the counts of the slots in use.
func (s *Sem) sum() int64 {
	var n int64
	for i := range int(s.bound.Load()) {
		_, held, _ := s.slotAt(i)
		n += int64(held.Load() & countMask)
	}
	return n
}

// take adds n to the handle's count and keeps it if the sum stays within
// the capacity. Only the head of the queue may take while a head starves.
func (s *Sem) take(n int64, head bool) bool {
	if !head && s.sum()+n > s.capacity {
		return false // no room: not even a transient add to disturb the head
	}
	s.held.Add(uint64(n))
	if head || s.starve.Load() == 0 || queueEmpty(s.tickets.Load()) {
		if s.sum() <= s.capacity {
			if !head {
				s.kickHeadOnce()
			}
			return true
		}
	}
	s.held.Add(-uint64(n))
	if !head {
		// The head may have summed with this n in and gone to sleep.
		s.kickIfQueued()
	}
	return false
}

func queueEmpty(t uint64) bool { return uint32(t>>32) == uint32(t) }

// kickHeadOnce wakes the head of the queue, if anyone queues, the first
// time this handle takes permits past it: the head watches the processes
// of the handles (see watchHolders), and looks again to watch this one's.
func (s *Sem) kickHeadOnce() {
	t := s.tickets.Load()
	if queueEmpty(t) {
		return
	}
	if k := 1<<32 | uint64(uint32(t)); s.kicked.Swap(k) != k {
		s.kick()
	}
}

// kickIfQueued wakes the head of the queue, if anyone queues.
func (s *Sem) kickIfQueued() { s.kick() }

// kick wakes the waiter whose ticket is served, or, when no slot has that
// ticket (its waiter is recording it, gave up or died), every waiter, so
// that the next in line can skip it.
func (s *Sem) kick() {
	t := s.tickets.Load()
	if queueEmpty(t) {
		return
	}
	if s.starve.Load() == 0 && mono()-s.headAt.Load() > int64(starveAfter) {
		// The head was served starveAfter ago and has not taken its
		// permits: it has not run since (the scheduler has not got to
		// it), and those who overtake it keep the CPUs it waits for. From
		// now on they queue.
		s.starve.Store(1)
	}
	head := tHas | uint64(uint32(t))
	b := int(s.bound.Load())
	for i := range b {
		if _, _, tk := s.slotAt(i); tk.Load() == head {
			ring(s.bellAt(i))
			return
		}
	}
	for i := range b {
		if _, _, tk := s.slotAt(i); tk.Load()&tHas != 0 {
			ring(s.bellAt(i))
		}
	}
}

// ring wakes the waiter of a bell. The bell's low bit says that the waiter
// sleeps, so a ring makes a system call only when it must; a waiter that
// has not gone to sleep yet finds the bell changed and looks again. The
// ring that wakes clears the bit, so that the rings that follow before the
// waiter has run (a releaser that takes again at once rings at every
// release) make no system call.
func ring(bell *word.Uint32) {
	for {
		v := bell.Load()
		if bell.CompareAndSwap(v, (v+2)&^1) {
			if v&1 != 0 {
				ipc.FutexWake((*uint32)(unsafe.Pointer(bell)), 1)
			}
			return
		}
	}
}

func (s *Sem) grant(n int64) driver.Grant {
	shm.RaceAcquire(s.rsync)
	return driver.Grant{N: n, Loss: s.loss, Data: s}
}

// TryAcquire takes n permits if they are free and nobody queues (the
// permits and tickets of dead processes are reclaimed first), and
// otherwise returns an error matching baton.ErrLocked.
func (s *Sem) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	if err := s.check(n); err != nil {
		return driver.Grant{}, err
	}
	if s.take(n, false) {
		return s.grant(n), nil
	}
	for range 8 {
		progress := s.reclaimDead()
		// Tickets of waiters that died or gave up: each skip moves the
		// queue on, so this ends.
		for t := s.tickets.Load(); !queueEmpty(t) && s.headGone(uint32(t), true); t = s.tickets.Load() {
			progress = true
		}
		if s.take(n, false) {
			return s.grant(n), nil
		}
		if !progress {
			break
		}
	}
	return driver.Grant{}, fmt.Errorf("%d permits: %w", n, baton.ErrLocked)
}

func (s *Sem) check(n int64) error {
	if s.closed.Load() {
		return baton.ErrClosed
	}
	return baton.ValidatePermits(n, s.capacity)
}
