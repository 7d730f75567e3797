//go:build linux

package shmchan

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

func mk(lap, owner, phase uint64) uint64 {
	return (lap&lapMask)<<lapShift | owner<<ownerShift | phase
}
func lapOf(v uint64) uint64   { return v >> lapShift }
func phaseOf(v uint64) uint64 { return v & 3 }
func ownerOf(v uint64) uint64 {
	if p := phaseOf(v); p != phaseWriting && p != phaseReading {
		return 0
	}
	return v >> ownerShift & (tableSize - 1)
}

// lapDiff returns a-b for laps, which wrap at lapMask.
func lapDiff(a, b uint64) int64 { return int64((a-b)<<lapShift) >> lapShift }

func (c *Chan) lap(pos uint64) uint64 { return pos / c.capacity & lapMask }

// check returns the error that ends every call of the handle, if any.
func (c *Chan) check() error {
	if c.closing.Load() {
		return baton.ErrClosed
	}
	if c.gone.Load() {
		return errRemoved
	}
	return nil
}

func (c *Chan) closed() bool { return c.u32(offClosed).Load() != 0 }

// advance moves the position word at off on to pos, unless it is there
// or further already: a batch publishes where it ended once.
func (c *Chan) advance(off uintptr, pos uint64) {
	w := c.u64(off)
	for {
		cur := w.Load()
		if int64(pos-cur) <= 0 || w.CompareAndSwap(cur, pos) {
			return
		}
	}
}

// reserveNext reserves the slot of pos, the one after the caller's last
// reservation of the batch, if it is free on its lap: a batch walks on
// without the shared position word, which it moves once at its end.
func (c *Chan) reserveNext(pos uint64, want, mine uint64) (*word.Uint64, bool) {
	st := c.state(pos)
	v := st.Load()
	return st, v == want && st.CompareAndSwap(v, mine)
}

// reserveSend reserves the slot at the tail. When the ring is full there
// it returns ok false with the state that blocks.
func (c *Chan) reserveSend() (pos uint64, st *word.Uint64, block uint64, ok bool) {
	tail := c.u64(offTail)
	for {
		t := tail.Load()
		st = c.state(t)
		lap := c.lap(t)
		v := st.Load()
		switch d := lapDiff(lapOf(v), lap); {
		case d == 0 && phaseOf(v) == phaseEmpty:
			if st.CompareAndSwap(v, mk(lap, c.me, phaseWriting)) {
				tail.CompareAndSwap(t, t+1)
				return t, st, 0, true
			}
		case d >= 0: // taken already: move the tail on
			tail.CompareAndSwap(t, t+1)
		case d == -1 && phaseOf(v) != phaseEmpty:
			return t, st, v, false // the previous lap's message is still there
		}
	}
}

// reserveRecv reserves the slot at the head. When there is nothing to
// take there it returns ok false with the state that blocks.
func (c *Chan) reserveRecv() (pos uint64, st *word.Uint64, block uint64, ok bool) {
	head := c.u64(offHead)
	for {
		h := head.Load()
		st = c.state(h)
		lap := c.lap(h)
		v := st.Load()
		d := lapDiff(lapOf(v), lap)
		switch {
		case d == 0 && phaseOf(v) == phaseFull:
			if st.CompareAndSwap(v, mk(lap, c.me, phaseReading)) {
				head.CompareAndSwap(h, h+1)
				return h, st, 0, true
			}
		case d > 0 || d == 0 && phaseOf(v) == phaseReading: // taken or skipped
			head.CompareAndSwap(h, h+1)
		default: // empty, being written, or the previous lap still being read
			return h, st, v, false
		}
	}
}

// recover gives up the slot of state v, writing or reading for a process
// that has exited, as empty on the next lap, and wakes both sides.
func (c *Chan) recover(st *word.Uint64, v uint64) {
	if st.CompareAndSwap(v, mk(lapOf(v)+1, 0, phaseEmpty)) {
		c.kick(offRecvWord)
		c.kick(offSendWord)
	}
}

// reclaim recovers the slot of state v if another process holds it and
// has exited, and reports whether it did.
func (c *Chan) reclaim(st *word.Uint64, v uint64) bool {
	o := ownerOf(v)
	if o == 0 || o == c.me || !c.deadEntry(c.entry(o).Load()) {
		return false
	}
	c.recover(st, v)
	return true
}

// wake wakes the sleepers of a word if its flag says some may sleep. It
// wakes them all: a waker that finds the flag cleared by another one
// leaves its slots to that one's wake-up, which must therefore reach
// every sleeper; those that find nothing go back to sleep.
func (c *Chan) wake(word, flag uintptr, k int) {
	if k == 0 || c.u32(flag).Load() == 0 || c.u32(flag).Swap(0) == 0 {
		return
	}
	c.u32(word).Add(1)
	_, _ = ipc.FutexWake((*uint32)(unsafe.Add(c.base, word)), math.MaxInt32)
}

// wait blocks until the state of st is no longer v (or may not be), ctx
// ends, or the handle is interrupted: it spins briefly, then sleeps on
// the futex word of its side. A slot held by a process that has exited is
// recovered; one held by a live other process is watched through a pidfd,
// whose exit wakes the word.
func (c *Chan) wait(ctx context.Context, word, flag uintptr, st *word.Uint64, v uint64) error {
	seen, sleep, err := c.arm(ctx, word, flag, st, v)
	if !sleep {
		return err
	}
	// After a CloseSend the caller returns, unless it is a receiver
	// behind a slot being written: that writer commits or gives up.
	if c.closed() && (word == offSendWord || phaseOf(v) != phaseWriting) {
		return nil
	}
	if c.reclaim(st, v) {
		return nil
	}
	dead, e, err := c.sleep(ctx, word, seen, ownerOf(v))
	if dead && c.deadEntry(e) {
		c.recover(st, v)
	}
	return err
}

// arm is the start of every wait: it spins on st while it reads v, then
// tells wakers of a sleeper on flag and looks again. With sleep it returns
// the futex word's value to sleep on; without, the caller looks again, or
// returns err.
func (c *Chan) arm(ctx context.Context, word, flag uintptr, st *word.Uint64, v uint64) (seen uint32, sleep bool, err error) {
	sp := &c.spinRecv
	if word == offSendWord {
		sp = &c.spinSend
	}
	if sp.spin(st, v) {
		return 0, false, nil
	}
	// With one P, a peer goroutine of this process may be queued behind
	// this one, and a futex wait holds the P until the runtime takes it
	// back: let it run first. With more, a Gosched only hands this
	// goroutine to another thread, a wake-up and a sleep of the runtime's
	// own, while an idle P would run the peer anyway.
	if runtime.GOMAXPROCS(0) == 1 {
		runtime.Gosched()
	}
	seen = c.u32(word).Load()
	c.u32(flag).Store(1)
	if st.Load() != v {
		return 0, false, nil
	}
	if err := c.check(); err != nil {
		return 0, false, err
	}
	return seen, ctx.Err() == nil, ctx.Err()
}

// sleep sleeps on the futex word at word while it reads seen, until a
// wake-up, the end of ctx, or an interruption of the handle. With owner, a
// table entry of another process, that process's exit wakes it too: dead
// reports that it had exited already, e the entry as read.
func (c *Chan) sleep(ctx context.Context, word uintptr, seen uint32, owner uint64) (dead bool, e uint64, err error) {
	var watch *ipc.ExitWatch
	timeout := time.Duration(-1)
	if owner != 0 && owner != c.me {
		e = c.entry(owner).Load()
		if pid := int(uint32(e)); pid != c.self.PID {
			w, gone, err := ipc.NotifyExit(pid, uint32(e>>32), ^uint32(0), func() { c.kick(word) })
			switch {
			case gone:
				return true, e, nil
			case err != nil:
				timeout = 100 * time.Millisecond // no pidfd: look again now and then
			}
			watch = w
		}
	}
	stop := context.AfterFunc(ctx, func() { c.kick(word) })
	_, err = ipc.FutexWait((*uint32)(unsafe.Add(c.base, word)), seen, timeout)
	stop()
	watch.Stop()
	if err != nil {
		return false, e, err
	}
	if err := c.check(); err != nil {
		return false, e, err
	}
	return false, e, ctx.Err()
}

// Send sends as many of msgs, in order, as fit; with block it waits until
// the first fits.
func (c *Chan) Send(ctx context.Context, msgs [][]byte, block bool) (int, error) {
	n := 0
	err := c.send(ctx, block, func(buf []byte) (int, bool, error) {
		size := copy(buf, msgs[n])
		n++
		return size, n < len(msgs), nil
	})
	return n, err
}

// SendFunc sends one message that fill writes in place.
func (c *Chan) SendFunc(ctx context.Context, block bool, fill func(buf []byte) (int, error)) error {
	return c.send(ctx, block, func(buf []byte) (int, bool, error) {
		size, err := fill(buf)
		return size, false, err
	})
}

// send reserves slots and has next write each one, until next says no
// more or the ring is full after the first; it wakes receivers once.
func (c *Chan) send(ctx context.Context, block bool, next func(buf []byte) (size int, more bool, err error)) error {
	if err := c.check(); err != nil {
		return err
	}
	if c.one {
		return c.sendOne(ctx, block, next)
	}
	sent := 0
	var after uint64 // the position after the last one reserved, once sent > 0
	defer func() {
		if sent > 1 {
			c.advance(offTail, after)
		}
		c.wake(offRecvWord, offRecvFlag, sent)
	}()
	for {
		if c.closed() {
			return baton.ErrChannelClosed
		}
		var pos, v uint64
		var st *word.Uint64
		ok := false
		if sent > 0 {
			lap := c.lap(after)
			pos = after
			st, ok = c.reserveNext(after, mk(lap, 0, phaseEmpty), mk(lap, c.me, phaseWriting))
		}
		if !ok {
			pos, st, v, ok = c.reserveSend()
		}
		if !ok {
			if sent > 0 {
				return nil
			}
			if !block {
				if c.reclaim(st, v) {
					continue
				}
				return baton.ErrChannelFull
			}
			if err := c.wait(ctx, offSendWord, offSendFlag, st, v); err != nil {
				return err
			}
			continue
		}
		lap := c.lap(pos)
		mine := mk(lap, c.me, phaseWriting)
		// A CloseSend before the reservation is seen here: the slot is
		// given up, so no message follows a receiver's end.
		if c.closed() {
			c.recover(st, mine)
			return baton.ErrChannelClosed
		}
		size, more, err := c.fill(pos, st, mine, next)
		if err != nil {
			return err
		}
		*c.length(pos) = uint64(size)
		if !st.CompareAndSwap(mine, mk(lap, 0, phaseFull)) {
			return fmt.Errorf("%s: slot of position %d taken over while written", c.r.Path(), pos)
		}
		sent++
		after = pos + 1
		if !more {
			return nil
		}
	}
}

// fill calls next on the slot of pos, giving the slot up if next fails or
// panics.
func (c *Chan) fill(pos uint64, st *word.Uint64, mine uint64, next func([]byte) (int, bool, error)) (size int, more bool, err error) {
	done := false
	defer func() {
		if !done {
			c.recover(st, mine)
		}
	}()
	size, more, err = next(c.data(pos))
	if err == nil && (size < 0 || size > c.maxMsg) {
		err = fmt.Errorf("%w: a message of %d bytes, not 0 to %d", baton.ErrInvalidArgument, size, c.maxMsg)
	}
	done = err == nil
	return size, more, err
}

// Recv takes up to max messages, calling take with each; with block it
// waits until there is one.
func (c *Chan) Recv(ctx context.Context, max int, block bool, take func(msg []byte)) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	if c.one {
		return c.recvOne(ctx, max, block, take)
	}
	n := 0
	var next uint64 // the position after the last one taken, once n > 0
	// reading is the slot take has in hand: if take panics, the message
	// counts as taken and its slot is given back on the next lap, so the
	// ring goes on.
	var reading *word.Uint64
	var readPos uint64
	defer func() {
		if reading != nil {
			lap := c.lap(readPos)
			reading.CompareAndSwap(mk(lap, c.me, phaseReading), mk(lap+1, 0, phaseEmpty))
			n++
			next = readPos + 1
		}
		if n > 1 {
			c.advance(offHead, next)
		}
		c.wake(offSendWord, offSendFlag, n)
	}()
	for n < max {
		var pos, v uint64
		var st *word.Uint64
		ok := false
		if n > 0 {
			lap := c.lap(next)
			pos = next
			st, ok = c.reserveNext(next, mk(lap, 0, phaseFull), mk(lap, c.me, phaseReading))
		}
		if !ok {
			pos, st, v, ok = c.reserveRecv()
		}
		if !ok {
			switch {
			case n > 0:
				return n, nil
			case phaseOf(v) != phaseWriting && c.closed():
				// The slot is looked at again after the flag: a sender
				// that reserved it before the CloseSend changed it, and
				// one that reserves it after sees the flag and gives up.
				if st.Load() == v {
					return 0, baton.ErrChannelClosed
				}
				continue
			case !block:
				if c.reclaim(st, v) {
					continue
				}
				return 0, baton.ErrChannelEmpty
			}
			if err := c.wait(ctx, offRecvWord, offRecvFlag, st, v); err != nil {
				return 0, err
			}
			continue
		}
		lap := c.lap(pos)
		size := *c.length(pos)
		if size <= uint64(c.maxMsg) {
			reading, readPos = st, pos
			take(c.data(pos)[:size])
			reading = nil
		}
		if !st.CompareAndSwap(mk(lap, c.me, phaseReading), mk(lap+1, 0, phaseEmpty)) {
			return n, fmt.Errorf("%s: slot of position %d taken over while read", c.r.Path(), pos)
		}
		if size > uint64(c.maxMsg) {
			return n, fmt.Errorf("%s: the message at position %d claims %d bytes, more than %d: dropped", c.r.Path(), pos, size, c.maxMsg)
		}
		n++
		next = pos + 1
	}
	return n, nil
}

// CloseSend closes the channel for sending, for every handle.
func (c *Chan) CloseSend(ctx context.Context) error {
	if err := c.check(); err != nil {
		return err
	}
	if c.u32(offClosed).CompareAndSwap(0, 1) {
		c.kick(offRecvWord)
		c.kick(offSendWord)
	}
	return nil
}
