//go:build linux

package shmchan

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// Layout of the region (see the package doc). Every shared word is read
// and written atomically; message bytes are owned by the slot's reserver.
const (
	offMagic    = 0   // uint32
	offParams   = 8   // uint64: capacity<<32 | largest message; 0 until set
	offClosed   = 16  // uint32: 1 once CloseSend was called
	offTail     = 64  // uint64: next position to send, or a little behind
	offHead     = 128 // uint64: next position to receive, or a little behind
	offRecvWord = 192 // uint32 futex word of receivers
	offRecvFlag = 196 // uint32: 1 when a receiver may sleep
	offSendWord = 256 // uint32 futex word of senders
	offSendFlag = 260 // uint32: 1 when a sender may sleep
	offTable    = 320 // tableSize uint64: tag<<32 | pid of a handle's process; 0 free
	tableSize   = 1 << ownerBits
	hdrSize     = 12288
	slotHdr     = 16 // the state word, then the message length

	magic = 0x6263686e // "bchn"

	phaseEmpty   = 0
	phaseWriting = 1
	phaseFull    = 2
	phaseReading = 3
	ownerShift   = 2
	ownerBits    = 10 // handle entries 1..tableSize-1; 0 is nobody
	lapShift     = ownerShift + ownerBits
	lapMask      = 1<<(64-lapShift) - 1
)

// Chan is one handle on a named channel. It is safe for concurrent use;
// the caller (the core) calls Close once no other call is in progress.
type Chan struct {
	r        *ipc.Region
	base     unsafe.Pointer
	capacity uint64
	maxMsg   int
	slotSize uintptr
	me       uint64 // this handle's table entry
	self     ipc.Proc

	closing atomic.Bool // Interrupt was called

	spinRecv, spinSend spinner     // how long a wait of each side spins
	gone               atomic.Bool // the file was removed or replaced
	loss               driver.Loss
	stop               func() // ends the watch of the file

	// unmapped is set by Close, under mapMu, before the region goes: a
	// loss of the file may be told after Unwatch, and must not touch it.
	mapMu    sync.Mutex
	unmapped bool
}

// errRemoved is the cause of every call once the channel's file is gone.
var errRemoved = fmt.Errorf("%w: the channel's file was removed", baton.ErrLost)

// SlotBytes returns the size of one slot for messages of maxMessage bytes.
func SlotBytes(maxMessage int) int { return (slotHdr + maxMessage + 63) &^ 63 }

// FileSize returns the size of the file of a channel with these parameters.
func FileSize(capacity, maxMessage int) int { return hdrSize + capacity*SlotBytes(maxMessage) }

// OpenEntry opens the channel of a resolved entry (ipc.Namespace.Resolve
// with Kind), creating it with the given parameters when it does not
// exist. A parameter of 0 takes the existing channel's value, or the
// default for a new one (baton.DefaultChannelCapacity,
// baton.DefaultMaxMessage).
func OpenEntry(e ipc.Entry, capacity, maxMessage int) (*Chan, error) {
	if err := e.Check(Kind); err != nil {
		return nil, err
	}
	capacity, maxMessage = wanted(e.Path(), capacity, maxMessage)
	if size := FileSize(capacity, maxMessage); capacity > baton.MaxChannelCapacity || maxMessage > baton.MaxChannelMessage || size > ipc.MaxRegionSize {
		return nil, fmt.Errorf("%w: a channel of %d messages of %d bytes needs %d bytes, more than %d", baton.ErrInvalidArgument, capacity, maxMessage, size, ipc.MaxRegionSize)
	}
	// A channel's file is never reclaimed: messages in it are state, as
	// a written Value's data is.
	lay := &ipc.Layout{Kind: Kind, Size: FileSize(capacity, maxMessage), Magic: magic}
	r, self, err := shm.OpenEntry(e, Kind, lay, "channel", 32)
	if err != nil {
		if errors.Is(err, baton.ErrMismatch) {
			if have := readParams(e.Path()); have != 0 {
				return nil, mismatch(have, capacity, maxMessage, err)
			}
		}
		return nil, err
	}
	c := &Chan{r: r, base: unsafe.Pointer(&r.Bytes()[0]), capacity: uint64(capacity), maxMsg: maxMessage,
		slotSize: uintptr(SlotBytes(maxMessage)), self: self}
	p := uint64(capacity)<<32 | uint64(maxMessage)
	if !c.u64(offParams).CompareAndSwap(0, p) {
		if have := c.u64(offParams).Load(); have != p {
			r.Close()
			return nil, mismatch(have, capacity, maxMessage, nil)
		}
	}
	if err := c.claim(); err != nil {
		r.Close()
		return nil, err
	}
	_, _, stop, err := shm.WatchFile(r, &c.gone, &c.loss, errRemoved)
	if err != nil {
		c.entry(c.me).Store(0)
		r.Close()
		return nil, err
	}
	c.stop = stop
	c.loss.Watch(lossKick{c})
	return c, nil
}

// wanted fills parameters of 0 from the existing file, or the defaults.
func wanted(path string, capacity, maxMessage int) (int, int) {
	if capacity == 0 || maxMessage == 0 {
		// A file without parameters is being created: its creator sets
		// them right after sizing it.
		for range 100 {
			have := readParams(path)
			if have != 0 {
				capacity = cmp.Or(capacity, int(have>>32))
				maxMessage = cmp.Or(maxMessage, int(uint32(have)))
				break
			}
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return cmp.Or(capacity, baton.DefaultChannelCapacity), cmp.Or(maxMessage, baton.DefaultMaxMessage)
}

// readParams reads the parameters word of an existing file; 0 if none.
func readParams(path string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], offParams); err != nil {
		return 0
	}
	return binary.NativeEndian.Uint64(b[:])
}

// mismatch names the existing parameters that differ from the asked ones.
func mismatch(have uint64, capacity, maxMessage int, cause error) error {
	var errs []error
	if hc := int64(have >> 32); hc != int64(capacity) {
		errs = append(errs, &baton.MismatchError{Param: "capacity", Have: hc, Want: int64(capacity), Err: cause})
	}
	if hm := int64(uint32(have)); hm != int64(maxMessage) {
		errs = append(errs, &baton.MismatchError{Param: "largest message", Have: hm, Want: int64(maxMessage), Err: cause})
	}
	switch len(errs) {
	case 0:
		return cause
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], errs[1])
}

func (c *Chan) u64(off uintptr) *word.Uint64 { return (*word.Uint64)(unsafe.Add(c.base, off)) }
func (c *Chan) u32(off uintptr) *word.Uint32 { return (*word.Uint32)(unsafe.Add(c.base, off)) }
func (c *Chan) entry(i uint64) *word.Uint64  { return c.u64(offTable + uintptr(i)*8) }

// slot returns the offset of the slot of position pos.
func (c *Chan) slot(pos uint64) uintptr { return hdrSize + uintptr(pos%c.capacity)*c.slotSize }

func (c *Chan) state(pos uint64) *word.Uint64 { return c.u64(c.slot(pos)) }

// data returns the message area of the slot of pos.
func (c *Chan) data(pos uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(c.base, c.slot(pos)+slotHdr)), c.maxMsg)
}

func (c *Chan) length(pos uint64) *uint64 { return (*uint64)(unsafe.Add(c.base, c.slot(pos)+8)) }

// claim takes a free entry of the handle table for this handle, or, when
// none is free, the entry of a process that has exited, after recovering
// the slots that entry still names.
func (c *Chan) claim() error {
	me := uint64(c.self.Tag())<<32 | uint64(uint32(c.self.PID))
	for i := uint64(1); i < tableSize; i++ {
		if c.entry(i).CompareAndSwap(0, me) {
			c.me = i
			return nil
		}
	}
	for i := uint64(1); i < tableSize; i++ {
		if old := c.entry(i).Load(); c.deadEntry(old) && c.entry(i).CompareAndSwap(old, me) {
			c.me = i
			for pos := range c.capacity {
				if v := c.state(pos).Load(); ownerOf(v) == i {
					c.recover(c.state(pos), v)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("%s: all %d handle entries are in use", c.r.Path(), tableSize-1)
}

// deadEntry reports whether the process of table entry e has exited: it
// is gone, a zombie, or a later process with its pid. Errors count as
// alive: taking a live process's slot is worse than waiting.
func (c *Chan) deadEntry(e uint64) bool {
	if e == 0 {
		return true
	}
	pid, tag := int(uint32(e)), uint32(e>>32)
	if pid == c.self.PID {
		return tag != c.self.Tag()
	}
	p, st, ok, err := ipc.LookupProc(pid)
	if err != nil {
		return false
	}
	return !ok || p.Tag() != tag || st == 'Z' || st == 'X'
}

// Options returns the channel's capacity and largest message.
func (c *Chan) Options() (int, int) { return int(c.capacity), c.maxMsg }

// kick wakes every sleeper of a futex word, which then looks again.
func (c *Chan) kick(word uintptr) {
	c.u32(word).Add(1)
	_, _ = ipc.FutexWake((*uint32)(unsafe.Add(c.base, word)), math.MaxInt32)
}

// lossKick wakes the waiters of a handle whose file is gone.
type lossKick struct{ c *Chan }

func (k lossKick) LossFired(error) {
	k.c.mapMu.Lock()
	defer k.c.mapMu.Unlock()
	if !k.c.unmapped {
		k.c.kick(offRecvWord)
		k.c.kick(offSendWord)
	}
}

// Interrupt makes the calls in progress return baton.ErrClosed.
func (c *Chan) Interrupt() {
	c.closing.Store(true)
	c.kick(offRecvWord)
	c.kick(offSendWord)
}

// Close frees the handle's entry and unmaps the region; the channel stays.
// Closing twice is a no-op.
func (c *Chan) Close() error {
	c.mapMu.Lock()
	if c.unmapped {
		c.mapMu.Unlock()
		return nil
	}
	c.mapMu.Unlock()
	c.loss.Unwatch()
	c.stop()
	me := uint64(c.self.Tag())<<32 | uint64(uint32(c.self.PID))
	c.entry(c.me).CompareAndSwap(me, 0)
	c.mapMu.Lock()
	c.unmapped = true
	c.mapMu.Unlock()
	return c.r.Close()
}
