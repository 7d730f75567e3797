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
	offParams   = 8   // uint64: capacity<<32 | one-to-one flag | largest message; 0 until set
	offClosed   = 16  // uint32: 1 once CloseSend was called
	offTail     = 64  // uint64: next position to send, or a little behind
	offHead     = 128 // uint64: next position to receive, or a little behind
	offRecvWord = 192 // uint32 futex word of receivers
	offRecvFlag = 196 // uint32: 1 when a receiver may sleep
	offSendWord = 256 // uint32 futex word of senders
	offSendFlag = 260 // uint32: 1 when a sender may sleep
	offTable    = 320 // tableSize uint64: tag<<32 | pid of a handle's process; 0 free
	// The words of a one-to-one channel (one_linux.go), a line for what
	// each end writes per call.
	offOneTail  = 8512 // uint64: positions written and published by the sending end
	offOneSend  = 8576 // uint32: table entry of the handle holding the sending end
	offOneBusy  = 8580 // uint32: that entry while it writes a batch, else 0
	offOneHead  = 8640 // uint64: positions taken by the receiving end
	offOneFreed = 8648 // uint64: positions taken and read: their slots are free
	offOneRecv  = 8656 // uint32: table entry of the handle holding the receiving end
	tableSize   = 1 << ownerBits
	hdrSize     = 12288
	slotHdr     = 16 // the state word, then the message length

	magic = 0x6263686e // "bchn"

	oneFlag = 1 << 31 // in the parameters' low word: a one-to-one channel

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
	slots    uintptr // offset of the first slot
	slotSize uintptr
	msgOff   uintptr // offset of the message in a slot
	me       uint64  // this handle's table entry
	self     ipc.Proc
	one      bool // a one-to-one channel

	sendEnd, recvEnd end           // a one-to-one channel's ends in this handle
	intr             chan struct{} // closed by Interrupt

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

// SlotBytes returns the size of one slot for messages of maxMessage bytes:
// its header and message on whole cache lines; on a one-to-one channel,
// the message alone (the lengths are an array of their own, see
// one_linux.go), so that a message of 64 bytes takes one line.
func SlotBytes(maxMessage int, oneToOne bool) int {
	if oneToOne {
		return (maxMessage + 63) &^ 63
	}
	return (slotHdr + maxMessage + 63) &^ 63
}

// FileSize returns the size of the file of a channel with these parameters.
func FileSize(capacity, maxMessage int, oneToOne bool) int {
	return hdrSize + lengthsBytes(capacity, oneToOne) + capacity*SlotBytes(maxMessage, oneToOne)
}

// lengthsBytes is the size of a one-to-one channel's array of message
// lengths (uint32s, before the slots), on whole cache lines; 0 for a ring.
func lengthsBytes(capacity int, oneToOne bool) int {
	if !oneToOne {
		return 0
	}
	return (4*capacity + 63) &^ 63
}

// newChan returns a handle's view of the region r of a channel with these
// parameters.
func newChan(r *ipc.Region, capacity, maxMessage int, oneToOne bool, self ipc.Proc) *Chan {
	c := &Chan{r: r, base: unsafe.Pointer(&r.Bytes()[0]), capacity: uint64(max(capacity, 1)), maxMsg: maxMessage,
		one: oneToOne, slotSize: uintptr(SlotBytes(maxMessage, oneToOne)), self: self, intr: make(chan struct{}),
		slots: hdrSize + uintptr(lengthsBytes(capacity, oneToOne)), msgOff: slotHdr}
	if oneToOne {
		c.msgOff = 0
	}
	c.sendEnd.init()
	c.recvEnd.init()
	return c
}

// OpenEntry opens the channel of a resolved entry (ipc.Namespace.Resolve
// with Kind), creating it with the given parameters when it does not
// exist. A parameter of 0 takes the existing channel's value, or the
// default for a new one (baton.DefaultChannelCapacity,
// baton.DefaultMaxMessage).
//
// oneToOne asks for a one-to-one channel (baton.ChannelOptions.OneToOne);
// false takes the existing channel's kind, or many-to-many for a new one.
func OpenEntry(e ipc.Entry, capacity, maxMessage int, oneToOne bool) (*Chan, error) {
	if err := e.Check(Kind); err != nil {
		return nil, err
	}
	capacity, maxMessage, oneToOne = wanted(e.Path(), capacity, maxMessage, oneToOne)
	if size := FileSize(capacity, maxMessage, oneToOne); capacity > baton.MaxChannelCapacity || maxMessage > baton.MaxChannelMessage || size > ipc.MaxRegionSize {
		return nil, fmt.Errorf("%w: a channel of %d messages of %d bytes needs %d bytes, more than %d", baton.ErrInvalidArgument, capacity, maxMessage, size, ipc.MaxRegionSize)
	}
	// A channel's file is never reclaimed: messages in it are state, as
	// a written Value's data is.
	lay := &ipc.Layout{Kind: Kind, Size: FileSize(capacity, maxMessage, oneToOne), Magic: magic}
	r, self, err := shm.OpenEntry(e, Kind, lay, "channel", 32)
	if err != nil {
		if errors.Is(err, baton.ErrMismatch) {
			if have := readParams(e.Path()); have != 0 {
				return nil, mismatch(have, capacity, maxMessage, oneToOne, err)
			}
		}
		return nil, err
	}
	c := newChan(r, capacity, maxMessage, oneToOne, self)
	if p := params(capacity, maxMessage, oneToOne); !c.u64(offParams).CompareAndSwap(0, p) {
		// The two kinds' files differ in size, so a file that opened has
		// the kind wanted chose: any other word is a real clash.
		if have := c.u64(offParams).Load(); have != p {
			r.Close()
			return nil, mismatch(have, capacity, maxMessage, oneToOne, nil)
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

// params is the parameters word of a channel.
func params(capacity, maxMessage int, oneToOne bool) uint64 {
	p := uint64(capacity)<<32 | uint64(maxMessage)
	if oneToOne {
		p |= oneFlag
	}
	return p
}

// wanted fills parameters of 0, and the kind when one-to-one is not asked
// for, from the existing file, or the defaults.
func wanted(path string, capacity, maxMessage int, oneToOne bool) (int, int, bool) {
	if capacity == 0 || maxMessage == 0 || !oneToOne {
		// A file without parameters is being created: its creator sets
		// them right after sizing it.
		for range 100 {
			have := readParams(path)
			if have != 0 {
				capacity = cmp.Or(capacity, int(have>>32))
				maxMessage = cmp.Or(maxMessage, int(uint32(have)&^oneFlag))
				oneToOne = oneToOne || have&oneFlag != 0
				break
			}
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return cmp.Or(capacity, baton.DefaultChannelCapacity), cmp.Or(maxMessage, baton.DefaultMaxMessage), oneToOne
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
func mismatch(have uint64, capacity, maxMessage int, oneToOne bool, cause error) error {
	var errs []error
	if hc := int64(have >> 32); hc != int64(capacity) {
		errs = append(errs, &baton.MismatchError{Param: "capacity", Have: hc, Want: int64(capacity), Err: cause})
	}
	if hm := int64(uint32(have) &^ oneFlag); hm != int64(maxMessage) {
		errs = append(errs, &baton.MismatchError{Param: "largest message", Have: hm, Want: int64(maxMessage), Err: cause})
	}
	if oneToOne && have&oneFlag == 0 {
		errs = append(errs, errNotOneToOne)
	}
	if !oneToOne && have&oneFlag != 0 && len(errs) == 0 {
		// Created one-to-one between wanted's look and the open.
		errs = append(errs, fmt.Errorf("%w: the channel was created one-to-one meanwhile; open it again", baton.ErrMismatch))
	}
	if len(errs) == 0 {
		return cause
	}
	err := errs[0]
	for _, e := range errs[1:] {
		err = fmt.Errorf("%w; %w", err, e)
	}
	return err
}

// errNotOneToOne refuses a one-to-one opener of a many-to-many channel.
var errNotOneToOne = fmt.Errorf("%w: the channel exists for many senders and receivers, not one-to-one", baton.ErrMismatch)

func (c *Chan) u64(off uintptr) *word.Uint64 { return (*word.Uint64)(unsafe.Add(c.base, off)) }
func (c *Chan) u32(off uintptr) *word.Uint32 { return (*word.Uint32)(unsafe.Add(c.base, off)) }
func (c *Chan) entry(i uint64) *word.Uint64  { return c.u64(offTable + uintptr(i)*8) }

// slot returns the offset of the slot of position pos.
func (c *Chan) slot(pos uint64) uintptr { return c.slots + uintptr(pos%c.capacity)*c.slotSize }

func (c *Chan) state(pos uint64) *word.Uint64 { return c.u64(c.slot(pos)) }

// data returns the message area of the slot of pos.
func (c *Chan) data(pos uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(c.base, c.slot(pos)+c.msgOff)), c.maxMsg)
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
		// An entry an end names stays until the end's next taker
		// recovers it (one_linux.go).
		if c.namedByEnd(i) {
			continue
		}
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

// Options returns the channel's capacity, largest message and kind.
func (c *Chan) Options() (int, int, bool) { return int(c.capacity), c.maxMsg, c.one }

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
	if !c.closing.Swap(true) {
		close(c.intr)
	}
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
	c.leaveEnds()
	c.entry(c.me).CompareAndSwap(me, 0)
	c.mapMu.Lock()
	c.unmapped = true
	c.mapMu.Unlock()
	return c.r.Close()
}
