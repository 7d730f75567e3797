//go:build linux

package shmqueue

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
	"golang.org/x/sys/unix"
)

// Layout of the file. The header's words are accessed atomically; the
// slots' and the derived structures' under the lock.
const (
	offMagic     = 0   // uint32
	offLock      = 8   // uint64: tag<<32 | pid of the lock's owner (+ fLockWait); futex on its low half
	offSeq       = 16  // uint32: the waiters' futex word, incremented by every change they must see
	offSleepers  = 20  // uint32: claimants that may sleep on offSeq (see wake)
	offNextID    = 24  // uint64: the last job id given
	offToken     = 32  // uint64: the last token given
	offBack      = 40  // uint64: orders given at the back of the ready ring
	offFront     = 48  // uint64: orders given at its front
	offCommitted = 56  // uint64: the stamp of the last batch published
	offNextDue   = 64  // int64: the earliest due time of a delayed job (unix ns); 0: none
	offHead      = 72  // uint64: the ring's head (counts; mod Capacity)
	offTail      = 80  // uint64: the ring's tail
	offFreeTop   = 88  // uint64: entries in the free stack
	offFresh     = 96  // uint64: slots at and above it were never used
	offProcGen   = 104 // uint64: incremented when the participants change
	offAcked     = 112 // uint64: at least the slots acked and not yet swept into the free stack
	offSpinner   = 124 // uint32: the spinning claimant's end of spin (see spinEmpty); 0: none
	offProcs     = 128 // [MaxProcs]uint64: participants, tag<<32 | pid; 0: free
	hdrSize      = 4096

	offRing  = hdrSize              // [Capacity]uint32: slots of ready jobs, head to tail
	offFree  = offRing + 4*Capacity // [Capacity]uint32: free slots (a stack)
	offSlots = offFree + 4*Capacity // [Capacity]slot headers
	slotSize = 64                   // bytes of a slot header
	offData  = offSlots + Capacity*slotSize
	keyOff   = MaxPayload // in a slot's data: payload, key, reason
	rsnOff   = keyOff + baton.MaxJobKeyLen
	dataSize = 4608 // >= rsnOff + baton.MaxReasonLen
	fileSize = offData + Capacity*dataSize

	magic = 0x62717565 // "bque"
)

// Slot header fields (offsets within a slot).
const (
	sState = 0  // uint64: kind | attempt<<8; the publishing word
	sID    = 8  // uint64
	sOrder = 16 // uint64: ready: its place in the ring's order
	sDue   = 24 // int64 unix ns: delayed: when due; ready: since when; claimed: when; dead: when it died
	sOwner = 32 // uint64: claimed: tag<<32 | pid of the claimant
	sToken = 40 // uint64: claimed: the claim's token; staged: the batch stamp
	sMax   = 48 // uint32: max attempts
	sLen   = 52 // uint32: payload length
	sKeyH  = 56 // uint32: hash of the key (0 with no key)
	sLens  = 60 // uint32: key length | reason length<<16
)

// Slot kinds: the low byte of the state word.
const (
	stFree = iota
	stStaged
	stReady
	stDelayed
	stClaimed
	stDead
	// stAcked is a slot whose job was acknowledged, without the lock: it
	// is free, and goes to the free stack at the next sweep (take).
	stAcked
)

// Queue is one handle on a queue. It is safe for concurrent use.
type Queue struct {
	r    *ipc.Region
	base unsafe.Pointer
	me   uint64 // this process: tag<<32 | pid
	loss *driver.Loss
	gone atomic.Bool
	// The file's identity, which a removed or replaced file no longer has.
	dev, ino uint64

	mu     sync.Mutex
	claims map[uint32]uint64 // slot → token of the claims this handle holds; guarded by mu
	// stopFile ends the watch of the file, which runs while the handle
	// holds claims (their loss is what it reports); guarded by mu.
	stopFile func()
	// recent is set by every claim and cleared by every check of the
	// file: the watch stops at a check that finds no claim held and none
	// made since the check before (a check can come at once after the
	// watch starts). Guarded by mu.
	recent bool
	closed bool // guarded by mu
	// Watchers of other participants, by participant word; guarded by mu.
	watching map[uint64]bool
	watchCtx context.Context
	unwatch  context.CancelFunc
	watchers sync.WaitGroup
	seenGen  atomic.Uint64  // the offProcGen of the last watch
	rsync    *atomic.Uint64 // the file's race-detector word (shm.RaceSync)
	spin     spinner        // this handle's spins on an empty queue

	// Set under the queue's lock, for its unlock: jobs made ready, and
	// whether every sleeper must be woken.
	readied int
	wakeAll bool
}

var _ driver.Queue = (*Queue)(nil)

var (
	errRemoved = errors.New("queue file removed or replaced")
	errClosed  = errors.New("the queue handle was closed")
)

// layout is the file of a queue. A queue is never reclaimed: its jobs, its
// dead letters and the keys of its jobs are state that a later opener
// must find, as a written Value's data is.
var layout = ipc.Layout{Kind: Kind, Size: fileSize, Magic: magic, Fence: offToken}

// OpenEntry opens the queue of a resolved entry (ipc.Namespace.Resolve
// with Kind), creating it empty when it does not exist, and enters the
// calling process among its participants.
func OpenEntry(e ipc.Entry) (*Queue, error) {
	r, self, err := shm.OpenEntry(e, Kind, &layout, "queue", 22)
	if err != nil {
		return nil, err
	}
	q := &Queue{r: r, base: unsafe.Pointer(&r.Bytes()[0]), me: uint64(self.Tag())<<32 | uint64(self.PID)}
	q.claims = make(map[uint32]uint64)
	q.watching = make(map[uint64]bool)
	q.watchCtx, q.unwatch = context.WithCancel(context.Background())
	q.loss = driver.NewLoss()
	var st unix.Stat_t
	if err := unix.Stat(r.Path(), &st); err != nil {
		r.Close()
		return nil, &fs.PathError{Op: "stat", Path: r.Path(), Err: err}
	}
	q.dev, q.ino = uint64(st.Dev), st.Ino
	q.rsync = shm.RaceSync(q.dev, q.ino)
	if err := q.join(); err != nil {
		r.Close()
		return nil, err
	}
	return q, nil
}

// MaxPayload returns the largest payload (driver.Queue).
func (q *Queue) MaxPayload() int { return MaxPayload }

func (q *Queue) u64(off int) *word.Uint64 { return (*word.Uint64)(unsafe.Add(q.base, off)) }
func (q *Queue) u32(off int) *word.Uint32 { return (*word.Uint32)(unsafe.Add(q.base, off)) }

// futex returns the futex word at off (the low half of a 64-bit word, or a
// 32-bit one).
func (q *Queue) futex(off int) *uint32 { return (*uint32)(unsafe.Add(q.base, off+lowHalf)) }

// seqWord is the claimants' futex word.
func (q *Queue) seqWord() *uint32 { return (*uint32)(unsafe.Add(q.base, offSeq)) }

// lowHalf is the offset of the low half of a 64-bit word.
var lowHalf = func() int {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) == 0 {
		return 4 // big endian
	}
	return 0
}()

func slotOff(i uint32) int                       { return offSlots + int(i)*slotSize }
func (q *Queue) sw(i uint32, f int) *word.Uint64 { return q.u64(slotOff(i) + f) }
func (q *Queue) sh(i uint32, f int) *word.Uint32 { return q.u32(slotOff(i) + f) }

// data returns the data area of slot i.
func (q *Queue) data(i uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(q.base, offData+int(i)*dataSize)), dataSize)
}

// put64 and put32 are plain stores, for the words of the file that only
// holders of the lock read (and Inspect, which may see them torn): under
// the lock, before the store of a state word or the lock's release that
// publishes them. A plain store to a line another CPU holds does not wait
// for the line, as an atomic one does; and a store retired before its
// process was killed is in memory all the same.
func (q *Queue) put64(off int, v uint64) { *(*uint64)(unsafe.Add(q.base, off)) = v }
func (q *Queue) put32(off int, v uint32) { *(*uint32)(unsafe.Add(q.base, off)) = v }

func (q *Queue) ring(pos uint64) *word.Uint32 { return q.u32(ringOff(pos)) }
func ringOff(pos uint64) int                  { return offRing + 4*int(pos%Capacity) }
func (q *Queue) free(n uint64) *word.Uint32   { return q.u32(offFree + 4*int(n)) }

// held starts the watch of the file when the handle comes to hold claims;
// under mu. The watch is stopped by its first check that finds the handle
// holding none and having made none since the check before (checkFile),
// not by the Ack of the last claim: a claimant
// that claims and acks in a loop would otherwise start and stop it, and
// wake the watcher's goroutine, for every job. A handle idle for a
// WatchEvery checks nothing.
func (q *Queue) held() {
	if len(q.claims) == 0 {
		return
	}
	q.recent = true
	if q.stopFile == nil {
		q.stopFile = ipc.WatchLoss(q.checkFile, q.loss)
	}
}

// unwatchFile stops the watch of the file; under mu.
func (q *Queue) unwatchFile() {
	if q.stopFile != nil {
		q.stopFile()
		q.stopFile = nil
	}
}

// checkFile reports a queue file removed or replaced (Remove, baton rm):
// the handle's mapping is then shared with no new opener, and its claims
// are lost. A handle that holds no claim, and made none since the last
// check, stops the watch instead.
func (q *Queue) checkFile() error {
	q.mu.Lock()
	idle := len(q.claims) == 0 && !q.recent
	q.recent = false
	if idle {
		q.unwatchFile()
	}
	q.mu.Unlock()
	if idle {
		return nil
	}
	if !ipc.Named(q.r.Path(), q.dev, q.ino) {
		q.gone.Store(true)
		return errRemoved
	}
	return nil
}

// Close gives back the claims this handle holds (their Loss fires), stops
// its watchers and unmaps the queue. The queue stays in its file.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	claims := q.claims
	q.claims = nil
	q.unwatchFile()
	q.mu.Unlock()
	q.loss.Fire(errClosed)
	q.unwatch()
	q.watchers.Wait()
	var err error
	if len(claims) > 0 && !q.gone.Load() {
		err = q.giveBack(claims)
	}
	if cerr := q.r.Close(); err == nil {
		err = cerr
	}
	return err
}
