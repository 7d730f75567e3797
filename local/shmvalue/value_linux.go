//go:build linux

package shmvalue

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// Layout of the region. Every field is read and written atomically.
const (
	offMagic   = 0  // uint32
	offVersion = 8  // uint64: the committed version; futex on its low half
	offWriter  = 16 // uint64: tag<<32 | pid of the writer, 0 when free
	offWaiters = 24 // uint32: 1 when someone may sleep on the version
	offWWait   = 28 // uint32: 1 when a writer may sleep on the writer word
	hdrSize    = 64
	slotHdr    = 64 // uint64 length of the data, then padding to a cache line
	slotSize   = slotHdr + MaxData
	fileSize   = hdrSize + 2*slotSize

	magic = 0x6276616c // "bval"
)

// Value is one handle on a named value. It is safe for concurrent use; the
// caller (the core) calls Close once no other call is in progress.
type Value struct {
	r       *ipc.Region
	version *word.Uint64
	writer  *word.Uint64
	waiters *word.Uint32
	wwait   *word.Uint32
	me      uint64 // this process in the writer word: tag<<32 | pid
}

// OpenEntry opens the value of a resolved entry (ipc.Namespace.Resolve with
// Kind), creating it, never written, when it does not exist.
func OpenEntry(e ipc.Entry) (*Value, error) {
	r, self, err := shm.OpenEntry(e, Kind, &layout, "value", 32) // the writer word has 32 bits for the pid
	if err != nil {
		return nil, err
	}
	v := &Value{r: r, me: uint64(self.Tag())<<32 | uint64(uint32(self.PID))}
	v.version = (*word.Uint64)(v.at(offVersion))
	v.writer = (*word.Uint64)(v.at(offWriter))
	v.waiters = (*word.Uint32)(v.at(offWaiters))
	v.wwait = (*word.Uint32)(v.at(offWWait))
	return v, nil
}

// layout is the file of a value. A value is state: once written, its
// file stays until removed (Remove, baton rm), whoever has it open; one
// never written is reclaimed at the last close in the host.
var layout = ipc.Layout{Kind: Kind, Size: fileSize, Magic: magic, Idle: func(b []byte) bool {
	return (*word.Uint64)(unsafe.Pointer(&b[offVersion])).Load() == 0
}}

func (v *Value) at(off int) unsafe.Pointer { return unsafe.Pointer(&v.r.Bytes()[off]) }

func (v *Value) word(off int) *word.Uint64 { return (*word.Uint64)(v.at(off)) }

// slot returns the offset of the slot of version n.
func slot(n uint64) int { return hdrSize + int(n&1)*slotSize }

// futexWord is the low half of the version word.
func (v *Value) futexWord() *uint32 { return v.low(offVersion) }

// low returns the low half of the uint64 at off.
func (v *Value) low(off int) *uint32 {
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 { // big endian
		off += 4
	}
	return (*uint32)(v.at(off))
}

// Load returns the data and version committed last.
func (v *Value) Load(ctx context.Context) ([]byte, uint64, error) {
	for {
		n := v.version.Load()
		if n == 0 {
			return nil, 0, nil
		}
		s := slot(n)
		size := v.word(s).Load()
		if size <= MaxData {
			buf := make([]byte, size)
			v.copyOut(s+slotHdr, buf)
			if v.version.Load() == n {
				return buf, n, nil
			}
		} else if v.version.Load() == n {
			// Only a writer's copy, before its commit, can make this
			// slot's size wrong for a moment; committed, it is damage.
			return nil, 0, fmt.Errorf("%s: version %d has a size of %d bytes", v.r.Path(), n, size)
		}
		// A writer two versions on rewrote the slot meanwhile.
		runtime.Gosched()
	}
}

func (v *Value) copyOut(off int, buf []byte) {
	var w [8]byte
	for i := 0; i < len(buf); i += 8 {
		binary.NativeEndian.PutUint64(w[:], v.word(off+i).Load())
		copy(buf[i:], w[:])
	}
}

func (v *Value) copyIn(off int, data []byte) {
	for i := 0; i < len(data); i += 8 {
		var w [8]byte
		copy(w[:], data[i:])
		v.word(off + i).Store(binary.NativeEndian.Uint64(w[:]))
	}
}

// CompareAndSwap writes data as the version after old if old is current.
func (v *Value) CompareAndSwap(ctx context.Context, old uint64, data []byte) (uint64, error) {
	if len(data) > MaxData {
		return 0, fmt.Errorf("%w: %d bytes, more than %d", baton.ErrInvalidArgument, len(data), MaxData)
	}
	if n := v.version.Load(); n != old {
		return n, baton.ErrConflict
	}
	if err := v.lock(ctx); err != nil {
		return 0, err
	}
	if v.waiters.Load() != 0 {
		// Sleepers look again and watch this writer (see Wait).
		_, _ = ipc.FutexWake(v.low(offWriter), math.MaxInt32)
	}
	n := v.version.Load()
	if n != old {
		v.unlock()
		return n, baton.ErrConflict
	}
	next := n + 1
	s := slot(next)
	v.word(s).Store(uint64(len(data)))
	v.copyIn(s+slotHdr, data)
	// The commit. It cannot fail while the writer word is ours; the CAS
	// keeps the version from ever going back should it be otherwise.
	ok := v.version.CompareAndSwap(n, next)
	if ok && v.waiters.Swap(0) != 0 {
		// Before the writer word goes: waiters watch the process it
		// names, so a writer killed between its commit and this wake
		// still wakes them.
		_, _ = ipc.FutexWake(v.futexWord(), math.MaxInt32)
	}
	v.unlock()
	if !ok {
		return v.version.Load(), baton.ErrConflict
	}
	return next, nil
}

// unlock gives the writer word back and wakes a writer that sleeps on it.
func (v *Value) unlock() {
	v.writer.Store(0)
	if v.wwait.Swap(0) != 0 {
		_, _ = ipc.FutexWake(v.low(offWriter), math.MaxInt32)
	}
}

// lock takes the writer word. A writer holds it for the time of one copy,
// so contenders spin and yield first; then they sleep on it, watching its
// holder, and take it over once the holder is dead.
func (v *Value) lock(ctx context.Context) error {
	var w *ipc.Waiter
	for i := 0; ; i++ {
		if v.writer.CompareAndSwap(0, v.me) {
			return nil
		}
		if i < 16 {
			runtime.Gosched()
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		o := v.writer.Load()
		if o == 0 || o == v.me {
			runtime.Gosched()
			continue
		}
		if v.dead(o) {
			if v.writer.CompareAndSwap(o, v.me) {
				return nil
			}
			continue
		}
		if w == nil {
			w = new(ipc.Waiter)
			defer w.Close()
			if ctx.Done() != nil {
				defer context.AfterFunc(ctx, w.Ring)()
			}
		}
		// The holder's exit ends the sleep; it is dead for the takeover
		// only once a zombie (see dead), which the exit makes it.
		w.Watch(int(uint32(o)), uint32(o>>32))
		v.wwait.Store(1)
		if v.writer.Load() != o {
			continue
		}
		if err := w.Sleep(v.low(offWriter), uint32(o)); err != nil {
			return err
		}
	}
}

// dead reports whether the process of writer word o will never run again.
func (v *Value) dead(o uint64) bool {
	pid, tag := int(uint32(o)), uint32(o>>32)
	p, state, ok, err := ipc.LookupProc(pid)
	if err != nil {
		return false
	}
	return !ok || p.Tag() != tag || state == 'Z' || state == 'X'
}

// Wait blocks until the version is not ver or ctx ends. It sleeps with no
// timeout, watching the process in the writer word (a writer wakes the
// sleepers when it takes that word, so that they watch it): a writer
// killed between its commit and its wake-up wakes them by its exit.
func (v *Value) Wait(ctx context.Context, ver uint64) ([]byte, uint64, error) {
	var w ipc.Waiter
	defer w.Close()
	if ctx.Done() != nil {
		defer context.AfterFunc(ctx, w.Ring)()
	}
	for {
		n := v.version.Load()
		if n != ver {
			return v.Load(ctx)
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		v.waiters.Store(1)
		o := v.writer.Load()
		if v.version.Load() != ver {
			continue
		}
		if o != 0 {
			w.Watch(int(uint32(o)), uint32(o>>32))
		}
		// On the writer word too: a writer that takes it after this look
		// wakes the sleepers, so that they watch it.
		if err := w.Sleep2(v.futexWord(), uint32(ver), v.low(offWriter), uint32(o)); err != nil {
			return nil, 0, err
		}
	}
}

// Close unmaps the region; the value stays in its file.
func (v *Value) Close() error { return v.r.Close() }
