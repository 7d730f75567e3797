//go:build linux

package condvar

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// Cond is one handle on a named condition variable. It is safe for
// concurrent use.
type Cond struct {
	name  string
	r     *ipc.Region
	nwait *atomic.Int32
	order *atomic.Uint64
	me    uint64 // state pattern of this process: tag<<32 | pid
	pid   int

	// mu is held for reading by every call while it uses the mapping and
	// for writing by Close, which unmaps it.
	mu sync.RWMutex

	amu     sync.Mutex
	closed  bool                      // guarded by amu
	mine    map[int]bool              // slots this handle registered and has not given up, guarded by amu
	watches map[uint64]*ipc.ProcWatch // owners of other processes, guarded by amu
}

// Open opens the condition variable called name in ns, creating it when it
// does not exist. The name is validated before anything is created.
func Open(ns *ipc.Namespace, name string) (*Cond, error) {
	if _, err := ns.Path(kind, name); err != nil {
		return nil, err
	}
	self, err := ipc.Self()
	if err != nil {
		return nil, err
	}
	if self.PID > pidMask {
		return nil, fmt.Errorf("condvar: pid %d does not fit in 22 bits: %w", self.PID, baton.ErrUnsupported)
	}
	r, err := ipc.OpenRegion(ns, kind, name, fileSize)
	if err != nil {
		return nil, err
	}
	c := newCond(r, name)
	mg := (*atomic.Uint32)(c.at(offMagic))
	if !mg.CompareAndSwap(0, magic) && mg.Load() != magic {
		r.Close()
		return nil, fmt.Errorf("%w: %s is not a condition variable (magic %#x)", baton.ErrMismatch, r.Path(), mg.Load())
	}
	c.me = uint64(self.Tag())<<32 | uint64(self.PID)
	c.pid = self.PID
	return c, nil
}

func newCond(r *ipc.Region, name string) *Cond {
	c := &Cond{name: name, r: r, mine: map[int]bool{}, watches: map[uint64]*ipc.ProcWatch{}}
	c.nwait = (*atomic.Int32)(c.at(offNWait))
	c.order = (*atomic.Uint64)(c.at(offOrder))
	return c
}

func (c *Cond) at(off int) unsafe.Pointer { return unsafe.Pointer(&c.r.Bytes()[off]) }

func (c *Cond) slot(i int) *atomic.Uint64 {
	return (*atomic.Uint64)(c.at(hdrSize + i*slotSize))
}

func (c *Cond) slotOrder(i int) *atomic.Uint64 {
	return (*atomic.Uint64)(c.at(hdrSize + i*slotSize + 8))
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

func (c *Cond) errf(format string, args ...any) error {
	return fmt.Errorf("condvar: %q: "+format, append([]any{c.name}, args...)...)
}

func (c *Cond) isClosed() bool {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.closed
}

// Prepare registers the caller as a waiter and returns its ticket (the slot
// number). A Signal that starts after Prepare returned can choose it.
func (c *Cond) Prepare(ctx context.Context) (any, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.isClosed() {
		return nil, c.errf("%w", baton.ErrClosed)
	}
	c.nwait.Add(1)
	for attempt := 0; attempt < 2; attempt++ {
		for i := range Slots {
			s := c.slot(i)
			if s.Load() == 0 && s.CompareAndSwap(0, c.me|sWaiting) {
				c.slotOrder(i).Store(c.order.Add(1))
				c.amu.Lock()
				c.mine[i] = true
				c.amu.Unlock()
				return i, nil
			}
		}
		c.sweep()
	}
	c.nwait.Add(-1)
	return nil, c.errf("%d waiters already: %w", Slots, baton.ErrUnsupported)
}

// Wait blocks until a Signal or Broadcast chooses the ticket's slot, or ctx
// is done (then the registration is withdrawn, a signal already received is
// passed on, and the error matches ctx.Err()), or the handle is closed
// (ErrClosed).
func (c *Cond) Wait(ctx context.Context, ticket any) error {
	i, ok := ticket.(int)
	if !ok || i < 0 || i >= Slots {
		return c.errf("%w: ticket %v", baton.ErrInvalidArgument, ticket)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	c.amu.Lock()
	if c.closed || !c.mine[i] {
		closed := c.closed
		c.amu.Unlock()
		if closed {
			return c.errf("%w", baton.ErrClosed) // Close withdraws the slot
		}
		return c.errf("%w: ticket %d is not registered", baton.ErrInvalidArgument, i)
	}
	c.amu.Unlock()
	defer func() {
		c.amu.Lock()
		delete(c.mine, i)
		c.amu.Unlock()
	}()
	s, w := c.slot(i), c.futexWord(i)
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			// This may run after Wait returned, even after Close.
			c.mu.RLock()
			defer c.mu.RUnlock()
			if c.r.Bytes() != nil {
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
			return nil
		case lo&sSignalled != 0:
			c.free(i, v)
			return nil
		}
		if err := ctx.Err(); err != nil {
			c.withdraw(i)
			return c.errf("%w", err)
		}
		if c.isClosed() {
			c.withdraw(i)
			return c.errf("%w", baton.ErrClosed)
		}
		if _, err := ipc.FutexWait(w, lo, -1); err != nil {
			c.withdraw(i)
			return c.errf("%w", err)
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
		c.nwait.Add(-1)
		return true
	}
	return false
}

// withdraw gives up this process's registration in slot i; a signal it had
// received is passed on.
func (c *Cond) withdraw(i int) {
	s := c.slot(i)
	for {
		v := s.Load()
		if v&^sStatus != c.me || uint32(v)&(sWaiting|sSignalled) == 0 {
			return
		}
		if c.free(i, v) {
			if uint32(v)&sSignalled != 0 {
				c.signalOne()
			}
			return
		}
	}
}

// Cancel withdraws a registration that will not be waited on.
func (c *Cond) Cancel(ticket any) {
	i, ok := ticket.(int)
	if !ok || i < 0 || i >= Slots {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	c.amu.Lock()
	ok = !c.closed && c.mine[i]
	delete(c.mine, i)
	c.amu.Unlock()
	if ok {
		c.withdraw(i)
	}
}

// Signal wakes the oldest live waiter, if there is one.
func (c *Cond) Signal(ctx context.Context) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.r.Bytes() == nil {
		return c.errf("%w", baton.ErrClosed)
	}
	if c.nwait.Load() <= 0 {
		return nil
	}
	return c.signalOne()
}

func (c *Cond) signalOne() error {
	for {
		best, bestOrder := -1, uint64(0)
		var bv uint64
		for i := range Slots {
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
			if c.nwait.Load() > 0 {
				c.sweep()
			}
			return nil
		}
		if c.foreignDead(bv) {
			c.free(best, bv)
			continue
		}
		if c.slot(best).CompareAndSwap(bv, bv&^sWaiting|sSignalled) {
			if _, err := ipc.FutexWake(c.futexWord(best), 1); err != nil {
				return c.errf("%w", err)
			}
			return nil
		}
	}
}

// Broadcast wakes every waiter.
func (c *Cond) Broadcast(ctx context.Context) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.r.Bytes() == nil {
		return c.errf("%w", baton.ErrClosed)
	}
	if c.nwait.Load() <= 0 {
		return nil
	}
	var err error
	for i := range Slots {
		s := c.slot(i)
		for {
			v := s.Load()
			if uint32(v)&sWaiting == 0 {
				break
			}
			if s.CompareAndSwap(v, v&^sWaiting|sSignalled) {
				if _, e := ipc.FutexWake(c.futexWord(i), 1); e != nil && err == nil {
					err = c.errf("%w", e)
				}
				break
			}
		}
	}
	return err
}

// sweep frees the slots of dead processes; a signal a dead process had
// received is passed on.
func (c *Cond) sweep() {
	for i := range Slots {
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
	c.amu.Lock()
	if c.closed {
		c.amu.Unlock()
		return nil
	}
	c.closed = true
	for i := range c.mine {
		c.kick(i)
	}
	for k, w := range c.watches {
		w.Close()
		delete(c.watches, k)
	}
	c.amu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Slots prepared but never waited on.
	for i := range c.mine {
		c.withdraw(i)
		delete(c.mine, i)
	}
	return c.r.Close()
}

// Inspect describes the condition variable name: the number of slots in use
// (live waiters, plus slots of dead ones not yet swept) in Waiters. It
// returns an error matching fs.ErrNotExist when there is none, and creates
// nothing.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	if _, err := ns.Path(kind, name); err != nil {
		return baton.Info{}, err
	}
	r, err := ipc.OpenExistingRegion(ns, kind, name, fileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return baton.Info{}, fmt.Errorf("condvar: %q: %w", name, fs.ErrNotExist)
		}
		return baton.Info{}, err
	}
	defer r.Close()
	c := newCond(r, name)
	return baton.Info{Name: name, Kind: baton.KindCond, Impl: "futex", Holders: []baton.Holder{}, Waiters: max(int(c.nwait.Load()), 0)}, nil
}

// List describes every condition variable of ns.
func List(ns *ipc.Namespace) ([]baton.Info, error) {
	return ipc.ListKind(ns, kind, Inspect)
}

// Remove removes the file of the condition variable name. Waiters that
// still use it keep waiting on a mapping no new opener sees: wake them
// first. It returns an error matching fs.ErrNotExist when there is none.
func Remove(ns *ipc.Namespace, name string) error {
	if err := ipc.RemoveRegion(ns, kind, name); err != nil {
		return fmt.Errorf("condvar: %q: %w", name, err)
	}
	return nil
}
