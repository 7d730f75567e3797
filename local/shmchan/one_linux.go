//go:build linux

package shmchan

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/batonlock/baton"
)

// A one-to-one channel (baton.ChannelOptions.OneToOne) has one sending and
// one receiving handle at a time, so its slots need no state words: the
// sending end writes messages past the tail and publishes them by moving
// the tail once per call; the receiving end takes them up to the tail,
// publishing the head (what it took) before it reads and the freed mark
// after, once per call each. The sender writes only up to freed + capacity.
// No per-message atomic stands between one message's cache misses and the
// next's, so a batch streams as a plain copy would.
//
// Each end is a role word naming a handle's table entry, taken at the
// handle's first call of that end and given up by Close. A role whose
// holder's process has exited is taken over by the next handle that wants
// that end, which recovers it first: a new receiver counts what its dead
// predecessor had taken as taken (freed = head: those messages are lost,
// as for a receiver of the ring killed while reading), and a new sender
// starts at the published tail (a batch written and not published is
// dropped). Only an end's taker writes that end's words, so no one else
// has to be excluded; a table entry that an end names is not reused until
// then (claim).
//
// CloseSend against a sender in the middle of a batch: the sender sets the
// busy word (its own entry) before it looks at the closed flag; a receiver
// that finds the flag set and nothing to take looks at busy and waits for
// a live sender named there, which publishes or gives up and wakes it.

// end is one end of a one-to-one channel as a handle holds it.
type end struct {
	turn chan struct{} // one goroutine of the handle at a time uses the end
	held bool          // the handle holds the end's role
	pos  uint64        // sender: next position to write; receiver: to take
	seen uint64        // sender: freed as last read; receiver: the tail
}

func (e *end) init() { e.turn = make(chan struct{}, 1) }

// enter takes the end's turn among the handle's goroutines, or returns
// when ctx ends or the handle is interrupted. A turn taken after a wait
// looks again at what ends every call (the file's removal).
func (c *Chan) enter(ctx context.Context, e *end) error {
	select {
	case e.turn <- struct{}{}:
		return nil
	default:
	}
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.intr:
		return baton.ErrClosed
	}
	if err := c.check(); err != nil {
		<-e.turn
		return err
	}
	return nil
}

func (e *end) leave() { <-e.turn }

// takeEnd takes the role at off (offOneSend or offOneRecv) for this
// handle: a free one, or one whose holder's process has exited, which it
// recovers. A live holder makes it fail with baton.ErrChannelBusy.
func (c *Chan) takeEnd(off uintptr, e *end) error {
	role, me := c.u32(off), uint32(c.me)
	for {
		o := role.Load()
		if o != 0 && o != me {
			if ent := c.entry(uint64(o)).Load(); !c.deadEntry(ent) {
				side := "sending"
				if off == offOneRecv {
					side = "receiving"
				}
				return fmt.Errorf("%w: the %s end of this one-to-one channel is held by a handle of process %d", baton.ErrChannelBusy, side, uint32(ent))
			}
		}
		if role.CompareAndSwap(o, me) {
			break
		}
	}
	if off == offOneRecv {
		head := c.u64(offOneHead).Load()
		c.u64(offOneFreed).Store(head)
		e.pos, e.seen = head, head
		c.kick(offSendWord)
	} else {
		c.u32(offOneBusy).Store(0)
		e.pos, e.seen = c.u64(offOneTail).Load(), c.u64(offOneFreed).Load()
	}
	e.held = true
	return nil
}

// leaveEnds gives up the ends the handle holds (Close).
func (c *Chan) leaveEnds() {
	if c.sendEnd.held {
		c.u32(offOneSend).CompareAndSwap(uint32(c.me), 0)
	}
	if c.recvEnd.held {
		c.u32(offOneRecv).CompareAndSwap(uint32(c.me), 0)
	}
}

// namedByEnd reports whether an end's words name table entry i.
func (c *Chan) namedByEnd(i uint64) bool {
	for _, off := range []uintptr{offOneSend, offOneBusy, offOneRecv} {
		if uint64(c.u32(off).Load()) == i {
			return true
		}
	}
	return false
}

// sendOne is send on a one-to-one channel.
func (c *Chan) sendOne(ctx context.Context, block bool, next func([]byte) (int, bool, error)) error {
	e := &c.sendEnd
	if err := c.enter(ctx, e); err != nil {
		return err
	}
	defer e.leave()
	if c.closed() {
		return baton.ErrChannelClosed
	}
	if !e.held {
		if err := c.takeEnd(offOneSend, e); err != nil {
			return err
		}
	}
	freed := c.u64(offOneFreed)
	for e.pos-e.seen >= c.capacity {
		if f := freed.Load(); f != e.seen {
			e.seen = f
			continue
		}
		if c.closed() {
			return baton.ErrChannelClosed
		}
		if !block {
			return baton.ErrChannelFull
		}
		seen, sleep, err := c.arm(ctx, offSendWord, offSendFlag, freed, e.seen)
		if sleep && !c.closed() {
			_, _, err = c.sleep(ctx, offSendWord, seen, 0)
		}
		if err != nil {
			return err
		}
	}
	busy := c.u32(offOneBusy)
	busy.Store(uint32(c.me))
	sent := uint64(0)
	defer func() {
		if sent > 0 {
			e.pos += sent
			c.u64(offOneTail).Store(e.pos)
		}
		busy.Store(0)
		if sent == 0 && c.closed() {
			c.kick(offRecvWord) // a receiver at the end may wait for this batch
			return
		}
		c.wake(offRecvWord, offRecvFlag, int(sent))
	}()
	// A CloseSend before busy was set is seen here; one after it waits for
	// what this batch publishes.
	if c.closed() {
		return baton.ErrChannelClosed
	}
	for room := c.capacity - (e.pos - e.seen); sent < room; {
		pos := e.pos + sent
		size, more, err := next(c.data(pos))
		if err == nil && (size < 0 || size > c.maxMsg) {
			err = fmt.Errorf("%w: a message of %d bytes, not 0 to %d", baton.ErrInvalidArgument, size, c.maxMsg)
		}
		if err != nil {
			return err
		}
		*c.oneLen(pos) = uint32(size)
		sent++
		if !more {
			break
		}
	}
	return nil
}

// recvOne is Recv on a one-to-one channel.
func (c *Chan) recvOne(ctx context.Context, max int, block bool, take func([]byte)) (int, error) {
	e := &c.recvEnd
	if err := c.enter(ctx, e); err != nil {
		return 0, err
	}
	defer e.leave()
	if !e.held {
		if err := c.takeEnd(offOneRecv, e); err != nil {
			return 0, err
		}
	}
	tail := c.u64(offOneTail)
	if e.seen-e.pos < uint64(max) {
		e.seen = tail.Load()
	}
	for e.seen == e.pos {
		if t := tail.Load(); t != e.seen {
			e.seen = t
			break
		}
		var busy uint32
		if c.closed() {
			// Nothing more comes unless a sender is in the middle of a
			// batch; one whose process has exited never publishes it.
			busy = c.u32(offOneBusy).Load()
			if busy == 0 || c.deadEntry(c.entry(uint64(busy)).Load()) {
				if tail.Load() == e.pos {
					return 0, baton.ErrChannelClosed
				}
				continue
			}
		}
		if !block {
			return 0, baton.ErrChannelEmpty
		}
		// Asleep until a message, or, at the end, until the batch of the
		// sender named busy is published or given up.
		seen, sleep, err := c.arm(ctx, offRecvWord, offRecvFlag, tail, e.seen)
		if sleep && (busy == 0 && !c.closed() || busy != 0 && c.u32(offOneBusy).Load() == busy) {
			_, _, err = c.sleep(ctx, offRecvWord, seen, uint64(busy))
		}
		if err != nil {
			return 0, err
		}
	}
	k := min(e.seen-e.pos, uint64(max))
	head, freed := c.u64(offOneHead), c.u64(offOneFreed)
	head.Store(e.pos + k) // from here, a receiver killed loses these
	n := uint64(0)
	defer func() {
		// n counts a message whose take panicked: it is taken, and the
		// rest of the batch is left for the next call.
		e.pos += n
		if n < k {
			head.Store(e.pos)
		}
		freed.Store(e.pos)
		c.wake(offSendWord, offSendFlag, int(n))
	}()
	for n < k {
		pos := e.pos + n
		size := *c.oneLen(pos)
		n++
		if size > uint32(c.maxMsg) {
			return int(n - 1), fmt.Errorf("%s: the message at position %d claims %d bytes, more than %d: dropped", c.r.Path(), pos, size, c.maxMsg)
		}
		take(c.data(pos)[:size])
	}
	return int(n), nil
}

// inspectOne returns how many messages a one-to-one channel holds (sent
// and not yet freed) and the entries that hold its ends.
func (c *Chan) inspectOne() (held uint64, ends [2]uint32) {
	return c.u64(offOneTail).Load() - c.u64(offOneFreed).Load(), [2]uint32{c.u32(offOneSend).Load(), c.u32(offOneRecv).Load()}
}

// oneLen is the length of the message at pos, in the array of lengths
// before the slots: read and written plainly, ordered by the tail and the
// freed mark as the message bytes are.
func (c *Chan) oneLen(pos uint64) *uint32 {
	return (*uint32)(unsafe.Add(c.base, hdrSize+uintptr(pos%c.capacity)*4))
}
