//go:build linux

package condvar

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/closing"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// Cond is one handle on a named condition variable. It is safe for
// concurrent use.
type Cond struct {
	r     *ipc.Region
	bound *word.Uint64 // see offBound
	order *word.Uint64
	me    uint64 // state pattern of this process: tag<<32 | pid
	pid   int

	// mu is held for reading by every call while it uses the mapping and
	// for writing by Close, which unmaps it.
	mu sync.RWMutex

	amu     sync.Mutex
	closed  bool                      // guarded by amu
	mine    map[*waiter]struct{}      // registrations of this handle not given up, guarded by amu
	watches map[uint64]*ipc.ProcWatch // owners of other processes, guarded by amu
}

// waiter is one registration, the ticket of Prepare. A registration is
// deleted from mine before its slot is freed: from then on the slot may be
// another goroutine's, and nothing done for this one (a kick, a Close) may
// touch it.
type waiter struct{ slot int }

// Open opens the condition variable called name in ns, creating it when it
// does not exist. The name is validated before anything is created.
func Open(ns *ipc.Namespace, name string) (*Cond, error) {
	return ipc.Open(ns, Kind, name, OpenEntry)
}

// OpenEntry is Open for a name already resolved in its namespace
// (ipc.Namespace.Resolve with Kind), which is not checked or encoded again.
func OpenEntry(e ipc.Entry) (*Cond, error) {
	r, self, err := shm.OpenEntry(e, Kind, &layout, "condition variable", pidBits)
	if err != nil {
		return nil, err
	}
	c := newCond(r)
	c.me = uint64(self.Tag())<<32 | uint64(self.PID)
	c.pid = self.PID
	return c, nil
}

// layout is the file of a condition variable: it keeps nothing once no
// handle is open (a registration left is a dead process's), so it is
// reclaimed at the last close in the host.
var layout = ipc.Layout{Kind: Kind, Size: fileSize, Magic: magic, Idle: func([]byte) bool { return true }}

func newCond(r *ipc.Region) *Cond {
	c := &Cond{r: r, mine: map[*waiter]struct{}{}, watches: map[uint64]*ipc.ProcWatch{}}
	c.bound = (*word.Uint64)(c.at(offBound))
	c.order = (*word.Uint64)(c.at(offOrder))
	return c
}

func (c *Cond) at(off int) unsafe.Pointer { return unsafe.Pointer(&c.r.Bytes()[off]) }

func (c *Cond) slot(i int) *word.Uint64 {
	return (*word.Uint64)(c.at(hdrSize + i*slotSize))
}

func (c *Cond) slotOrder(i int) *word.Uint64 {
	return (*word.Uint64)(c.at(hdrSize + i*slotSize + 8))
}

// futexWord is the low half of slot i's state word.
func (c *Cond) futexWord(i int) *uint32 {
	off := hdrSize + i*slotSize
	if bigEndian {
		off += 4
	}
	return (*uint32)(c.at(off))
}

var bigEndian = func() bool {
	var x uint16 = 1
	return binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&x))[:]) == 1
}()

func (c *Cond) isClosed() bool {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.closed
}

// Prepare registers the caller as a waiter and returns its ticket. A
// Signal that starts after Prepare returned can choose it.
func (c *Cond) Prepare(ctx context.Context) (any, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.isClosed() {
		return nil, baton.ErrClosed
	}
	for attempt := 0; attempt < 2; attempt++ {
		for i := range Slots {
			s := c.slot(i)
			if s.Load() == 0 && s.CompareAndSwap(0, c.me|sWaiting) {
				c.raise(i)
				c.slotOrder(i).Store(c.order.Add(1))
				w := &waiter{slot: i}
				c.amu.Lock()
				c.mine[w] = struct{}{}
				c.amu.Unlock()
				return w, nil
			}
		}
		c.sweep(Slots)
	}
	return nil, fmt.Errorf("%d waiters already: %w", Slots, baton.ErrUnsupported)
}

// forget deletes w from the registrations of this handle.
func (c *Cond) forget(w *waiter) {
	c.amu.Lock()
	delete(c.mine, w)
	c.amu.Unlock()
}

// Wait blocks until a Signal or Broadcast chooses the ticket's slot, or ctx
// is done (then the registration is withdrawn, a signal already received is
// passed on, and the error matches ctx.Err()), or the handle is closed
// (ErrClosed).
func (c *Cond) Wait(ctx context.Context, ticket any) error {
	w, ok := ticket.(*waiter)
	if !ok || w == nil {
		return fmt.Errorf("%w: ticket %v", baton.ErrInvalidArgument, ticket)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	c.amu.Lock()
	if _, ok := c.mine[w]; c.closed || !ok {
		closed := c.closed
		c.amu.Unlock()
		if closed {
			return baton.ErrClosed // Close withdraws the slot
		}
		return fmt.Errorf("%w: ticket of slot %d is not registered", baton.ErrInvalidArgument, w.slot)
	}
	c.amu.Unlock()
	i := w.slot
	s, fw := c.slot(i), c.futexWord(i)
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			// This may run after Wait returned, even after Close: the
			// slot is kicked only while w is registered, which keeps
			// both the slot w's and the mapping in place.
			c.amu.Lock()
			defer c.amu.Unlock()
			if _, ok := c.mine[w]; ok {
				c.kick(i)
			}
		})
		defer stop()
	}
	for {
		v := s.Load()
		lo := uint32(v)
		switch {
		case v&^sStatus != c.me || lo&(sWaiting|sSignalled) == 0:
			// The slot is not ours any more: a sweep took this process for
			// dead (it cannot be). Report a wake-up; the caller re-checks.
			c.forget(w)
			return nil
		case lo&sSignalled != 0:
			c.forget(w)
			c.leave(i, true)
			return nil
		}
		err := ctx.Err()
		if err == nil && c.isClosed() {
			err = baton.ErrClosed
		}
		if err == nil {
			_, err = ipc.FutexWait(fw, lo, -1)
		}
		if err != nil {
			c.forget(w)
			c.leave(i, false)
			return err
		}
	}
}

// kick ends a wait of this process on slot i, in progress or about to
// start, once the reason for it (the wait's context is done, or the handle
// closed) is visible: while the slot is this process's and waiting it sets
// sKick, so that a FUTEX_WAIT on the word as it was returns at once, and
// then wakes the word's sleepers. A waiter that reads the bit set sees the
// reason too. The bit is only ever set (a toggle could come back to the
// value the waiter read, when both the context and Close kick); it goes
// with the registration when the slot is freed. A signalled slot's word
// has changed already.
func (c *Cond) kick(i int) {
	s := c.slot(i)
	for {
		v := s.Load()
		if v&^sStatus != c.me || uint32(v)&sWaiting == 0 || uint32(v)&sKick != 0 || s.CompareAndSwap(v, v|sKick) {
			break
		}
	}
	ipc.FutexWake(c.futexWord(i), 1<<30)
}

// free releases slot i, which holds v.
func (c *Cond) free(i int, v uint64) bool {
	if c.slot(i).CompareAndSwap(v, 0) {
		c.lower()
		return true
	}
	return false
}

// leave frees slot i, which this process's registration holds (its word
// may still change: a kick sets a bit). A signal the registration received
// is consumed when consume is set and passed on otherwise.
func (c *Cond) leave(i int, consume bool) {
	s := c.slot(i)
	for {
		v := s.Load()
		if v&^sStatus != c.me || uint32(v)&(sWaiting|sSignalled) == 0 {
			return
		}
		if c.free(i, v) {
			if !consume && uint32(v)&sSignalled != 0 {
				c.signalOne()
			}
			return
		}
	}
}

// Cancel withdraws a registration that will not be waited on.
func (c *Cond) Cancel(ticket any) {
	w, ok := ticket.(*waiter)
	if !ok || w == nil {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	c.amu.Lock()
	_, ok = c.mine[w]
	ok = ok && !c.closed // Close withdraws it
	if ok {
		delete(c.mine, w)
	}
	c.amu.Unlock()
	if ok {
		c.leave(w.slot, false)
	}
}

// Signal wakes the oldest live waiter, if there is one.
func (c *Cond) Signal(ctx context.Context) error { return c.wake(c.signalOne) }

// Broadcast wakes every waiter.
func (c *Cond) Broadcast(ctx context.Context) error { return c.wake(c.signalAll) }

// wake calls fn, which wakes waiters, while the mapping stays (ErrClosed
// once it is gone); it does not when no slot is in use (the bound is 0).
func (c *Cond) wake(fn func() error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.r.Bytes() == nil {
		return baton.ErrClosed
	}
	if c.bound.Load()&boundMask == 0 {
		return nil
	}
	return fn()
}

func (c *Cond) signalOne() error {
	for {
		best, bestOrder := -1, uint64(0)
		var bv uint64
		top := c.top()
		for i := range top {
			v := c.slot(i).Load()
			if uint32(v)&sWaiting == 0 {
				continue
			}
			// A slot being claimed has order 0 for a moment: it counts as
			// oldest, which only affects the order.
			if o := c.slotOrder(i).Load(); best < 0 || o < bestOrder {
				best, bestOrder, bv = i, o, v
			}
		}
		if best < 0 {
			if top > 0 {
				c.sweep(top)
			}
			return nil
		}
		if c.foreignDead(bv) {
			c.free(best, bv)
			continue
		}
		if c.slot(best).CompareAndSwap(bv, bv&^sWaiting|sSignalled) {
			if _, err := ipc.FutexWake(c.futexWord(best), 1); err != nil {
				return err
			}
			return nil
		}
	}
}

func (c *Cond) signalAll() error {
	var err error
	for i := range c.top() {
		s := c.slot(i)
		for {
			v := s.Load()
			if uint32(v)&sWaiting == 0 {
				break
			}
			if s.CompareAndSwap(v, v&^sWaiting|sSignalled) {
				if _, e := ipc.FutexWake(c.futexWord(i), 1); e != nil && err == nil {
					err = e
				}
				break
			}
		}
	}
	return err
}

// sweep frees the slots below n of dead processes; a signal a dead process
// had received is passed on.
func (c *Cond) sweep(n int) {
	for i := range n {
		v := c.slot(i).Load()
		if uint32(v)&(sWaiting|sSignalled) == 0 || !c.foreignDead(v) {
			continue
		}
		if c.free(i, v) && uint32(v)&sSignalled != 0 {
			c.signalOne()
		}
	}
}

// foreignDead reports whether slot state v belongs to a process other than
// this one that has died. Errors reading /proc count as alive.
func (c *Cond) foreignDead(v uint64) bool {
	owner := v &^ sStatus
	if owner == c.me {
		return false
	}
	pid, tag := int(uint32(v)&pidMask), uint32(v>>32)
	if pid == c.pid {
		return true // an earlier process with our pid
	}
	c.amu.Lock()
	defer c.amu.Unlock()
	if w := c.watches[owner]; w != nil {
		dead, err := w.Dead()
		if err == nil && dead {
			w.Close()
			delete(c.watches, owner)
		}
		return err == nil && dead
	}
	w, dead, err := ipc.WatchProc(pid, tag)
	if err != nil || dead {
		return dead
	}
	if len(c.watches) >= 64 {
		for k, old := range c.watches {
			old.Close()
			delete(c.watches, k)
		}
	}
	c.watches[owner] = w
	return false
}

// Close wakes the Waits in progress on this handle (they return ErrClosed
// and withdraw) and unmaps the condition variable.
func (c *Cond) Close() error {
	if !closing.First(&c.amu, &c.closed, func() {
		for w := range c.mine {
			c.kick(w.slot)
		}
		for k, w := range c.watches {
			w.Close()
			delete(c.watches, k)
		}
	}) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Registrations prepared but never waited on.
	c.amu.Lock()
	left := c.mine
	c.mine = map[*waiter]struct{}{}
	c.amu.Unlock()
	for w := range left {
		c.leave(w.slot, false)
	}
	return c.r.Close()
}
