//go:build linux

package shmrate

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/recipe"
)

// Layout of the region. Every field is read and written atomically.
const (
	offMagic = 0  // uint32
	offWord  = 8  // uint64: generation<<genShift | theoretical arrival time (µs)
	offSlots = 64 // two slots of slotSize: the parameters of a generation
	slotSize = 64
	sOwner   = 0  // uint64: tag<<32 | pid of the changer writing the slot, 0 when none
	sGen     = 8  // uint64: the generation whose parameters the slot holds
	sRate    = 16 // int64
	sPeriod  = 24 // int64 (ns)
	sBurst   = 32 // int64
	fileSize = offSlots + 2*slotSize

	magic    = 0x62726174 // "brat"
	genShift = 56
	tatMask  = 1<<genShift - 1
	maxGen   = 254 // generations run 1..maxGen and round again (0: never stored)
)

// Store is one handle on a rate limit in shared memory: a recipe.RateStore.
// It is safe for concurrent use.
type Store struct {
	r      *ipc.Region
	word   *word.Uint64
	me     uint64 // this process in an owner word: tag<<32 | pid
	closed atomic.Bool
}

var _ recipe.RateStore = (*Store)(nil)

// OpenEntry opens the limit of a resolved entry (ipc.Namespace.Resolve with
// Kind), creating it, with no parameters stored, when it does not exist.
func OpenEntry(e ipc.Entry) (*Store, error) {
	r, self, err := shm.OpenEntry(e, Kind, &layout, "rate limit", 32) // an owner word has 32 bits for the pid
	if err != nil {
		return nil, err
	}
	s := &Store{r: r, me: uint64(self.Tag())<<32 | uint64(uint32(self.PID))}
	s.word = s.u64(offWord)
	return s, nil
}

// layout is the file of a limit: kept once its parameters are stored
// (generation not 0), reclaimed at the last close otherwise.
var layout = ipc.Layout{Kind: Kind, Size: fileSize, Magic: magic, Idle: func(b []byte) bool {
	return (*word.Uint64)(unsafe.Pointer(&b[offWord])).Load()>>genShift == 0
}}

func (s *Store) u64(off int) *word.Uint64 {
	return (*word.Uint64)(unsafe.Pointer(&s.r.Bytes()[off]))
}

// Close unmaps the region; the limit stays. Closing twice is a no-op.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.r.Close()
}

func nextGen(g uint64) uint64 { return g%maxGen + 1 } // maxGen is even: parity alternates

func slot(g uint64) int { return offSlots + int(g&1)*slotSize }

// params returns the parameters of generation g, ok only if the word still
// names g after they were read: a changer rewrites g's slot only for the
// generation after the next, once the word has left g.
func (s *Store) params(g uint64) (lim recipe.Limit, ok bool) {
	o := slot(g)
	lim = recipe.Limit{
		Rate:   int64(s.u64(o + sRate).Load()),
		Period: time.Duration(s.u64(o + sPeriod).Load()),
		Burst:  int64(s.u64(o + sBurst).Load()),
	}
	return lim, s.u64(o+sGen).Load() == g && s.word.Load()>>genShift == g
}

// Step runs one step of the limit (see recipe.RateStore): one
// compare-and-swap of the word, retried while other steps move it.
func (s *Store) Step(ctx context.Context, op recipe.RateOp, lim recipe.Limit, n int64, at time.Time) (recipe.RateOutcome, error) {
	if s.closed.Load() {
		return recipe.RateOutcome{}, baton.ErrClosed
	}
	for {
		wall := time.Now()
		now := monoMicros(wall)
		if now > tatMask/2 {
			return recipe.RateOutcome{}, fmt.Errorf("%w: CLOCK_MONOTONIC at %d µs is past what the word holds", baton.ErrUnsupported, now)
		}
		w := s.word.Load()
		g, tat := w>>genShift, int64(w&tatMask)
		if op == recipe.RateSet || g == 0 {
			done, err := s.change(ctx, g, lim)
			if err != nil {
				return recipe.RateOutcome{}, err
			}
			if !done || op != recipe.RateSet {
				continue // run the step on the stored parameters
			}
			t := micros(lim)
			return recipe.RateOutcome{Now: wall, Remaining: remaining(now, tat, t, t*lim.Burst)}, nil
		}
		have, ok := s.params(g)
		if !ok {
			continue
		}
		if have != lim {
			return recipe.RateOutcome{Now: wall}, recipe.RateMismatch(have, lim)
		}
		o, next, err := gcra(op, lim, n, tat, now, wall, at)
		if err != nil || next < 0 || s.word.CompareAndSwap(w, g<<genShift|uint64(next)) {
			return o, err
		}
	}
}

// micros is the time one event takes of lim, in µs.
func micros(lim recipe.Limit) int64 { return int64(lim.Interval() / time.Microsecond) }

// gcra is one step of the generic cell rate algorithm at now (µs), the
// word's time being tat: it returns the outcome and the time to store, -1
// when nothing changes.
func gcra(op recipe.RateOp, lim recipe.Limit, n, tat, now int64, wall, at time.Time) (recipe.RateOutcome, int64, error) {
	o := recipe.RateOutcome{Now: wall}
	t := micros(lim)
	tau := t * lim.Burst
	next := int64(-1)
	switch op {
	case recipe.RateAllow:
		if n == 0 {
			break
		}
		nt := max(tat, now) + n*t
		if allowAt := nt - tau; allowAt > now {
			o.Wait = time.Duration(allowAt-now) * time.Microsecond
			break
		}
		o.Allowed, next = true, nt
	case recipe.RateReserve:
		next = max(tat, now) + n*t
		o.Wait = time.Duration(max(0, next-tau-now)) * time.Microsecond
	case recipe.RateCancel:
		if atUs := now + int64(at.Sub(wall)/time.Microsecond); atUs > now && tat > now {
			next = max(now, tat-n*t)
		}
	}
	if next > tatMask {
		return o, -1, fmt.Errorf("%w: reserved past what the word holds", baton.ErrInvalidArgument)
	}
	after := tat
	if next >= 0 {
		after = next
	}
	o.Remaining = remaining(now, after, t, tau)
	return o, next, nil
}

func remaining(now, tat, t, tau int64) int64 { return max(0, (now+tau-max(tat, now))/t) }

// changeMu keeps the changes of one process apart: its goroutines share
// its owner word value.
var changeMu sync.Mutex

// change stores lim as the generation after g, keeping the word's time:
// it writes the other slot under its owner word and then moves the word.
// done is false when the word left g meanwhile (the caller looks again).
func (s *Store) change(ctx context.Context, g uint64, lim recipe.Limit) (done bool, err error) {
	changeMu.Lock()
	defer changeMu.Unlock()
	ng := nextGen(g)
	o := slot(ng)
	owner := s.u64(o + sOwner)
	if err := s.claim(ctx, owner); err != nil {
		return false, err
	}
	defer s.release(owner)
	if s.word.Load()>>genShift != g {
		return false, nil
	}
	s.u64(o + sGen).Store(0) // not g's any more, nor yet ng's
	s.u64(o + sRate).Store(uint64(lim.Rate))
	s.u64(o + sPeriod).Store(uint64(lim.Period))
	s.u64(o + sBurst).Store(uint64(lim.Burst))
	s.u64(o + sGen).Store(ng)
	for {
		// Only the owner of ng's slot moves the word to ng: it is still g.
		w := s.word.Load()
		if s.word.CompareAndSwap(w, ng<<genShift|w&tatMask) {
			return true, nil
		}
	}
}

// claim takes an owner word. A changer holds it for a few stores, so a
// contender sleeps on it watching the holder, and takes it over once the
// holder is dead.
func (s *Store) claim(ctx context.Context, owner *word.Uint64) error {
	var w *ipc.Waiter
	for {
		if owner.CompareAndSwap(0, s.me) {
			return nil
		}
		o := owner.Load()
		if o == 0 {
			continue
		}
		if w == nil {
			w = new(ipc.Waiter)
			defer w.Close()
			if ctx.Done() != nil {
				defer context.AfterFunc(ctx, w.Ring)()
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if w.Watch(int(uint32(o)), uint32(o>>32)) || o == s.me {
			// Dead, or this process's own word left by a changer that is
			// gone (changeMu keeps the live ones apart).
			if owner.CompareAndSwap(o, s.me) {
				return nil
			}
			continue
		}
		if owner.Load() != o {
			continue
		}
		if err := w.Sleep(low(owner), uint32(o)); err != nil {
			return err
		}
	}
}

func (s *Store) release(owner *word.Uint64) {
	owner.Store(0)
	_, _ = ipc.FutexWake(low(owner), math.MaxInt32)
}

// low returns the low half of a 64-bit word, the pid of an owner.
func low(p *word.Uint64) *uint32 {
	off := uintptr(0)
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 { // big endian
		off = 4
	}
	return (*uint32)(unsafe.Add(unsafe.Pointer(p), off))
}

// monoMicros returns CLOCK_MONOTONIC in µs at wall, read through the
// runtime's clock (a system call per step would cost more than the step):
// the two differ by a constant, taken once.
func monoMicros(wall time.Time) int64 { return (monoBase + int64(wall.Sub(monoEpoch))) / 1000 }

var (
	monoEpoch = time.Now()
	monoBase  = func() int64 {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return ts.Nano() - int64(time.Since(monoEpoch))
	}()
)
