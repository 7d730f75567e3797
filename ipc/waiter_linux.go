//go:build linux

package ipc

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Waiter is how a blocked call of a same-host primitive sleeps: on a
// futex word of the shared mapping (Sleep), with no timeout, until that
// word is woken, or a process it watches exits (Watch), or Ring is called
// (the call's context ended). A call looks at the shared state, watches the
// processes whose death it would have to repair (the owner of a lock, the
// holders of permits), and sleeps; when it wakes it looks again, finds the
// dead process through Watch and repairs what it left.
//
// The sleep is one futex_waitv(2) on the shared word and on a private word
// of the Waiter: a Ring sets the private word before it wakes it, so a
// Ring that comes between the caller's last look and its sleep is not
// lost (the kernel compares the word as it queues the sleeper), and it
// wakes this Waiter only, never a sleeper on the shared word that a
// FUTEX_WAKE of that word was meant for.
//
// Kernels without futex_waitv (before Linux 5.16) or pidfd_open (5.3)
// get slices instead: Sleep returns after fallbackSlice, and Watch then
// reads the watched process's /proc entry.
//
// The zero value is ready to use. A Waiter is used by one call at a time
// (Ring excepted); Close ends its watches.
type Waiter struct {
	bell    atomic.Uint32 // private futex word: 1 once rung, until Sleep returns
	watches map[procKey]*watchRef
	round   uint32 // advances at each Sleep
}

type watchRef struct {
	e     *exitWatch // nil in slice mode: p is read at each Watch
	p     *ProcWatch
	round uint32 // the last round this process was watched in
}

const (
	// keepWatches bounds the watches a Waiter keeps of processes it did
	// not watch since its last sleep: a lock that passes between a few
	// processes does not open a pidfd per hold.
	keepWatches = 8
	// fallbackSlice is the sleep slice without futex_waitv or pidfds.
	fallbackSlice = time.Millisecond
)

var noWaitv atomic.Bool // futex_waitv returned ENOSYS

// Watch makes the Waiter's sleeps end when the process that has pid, with
// start-time tag, exits, and reports dead when it has exited already (or
// is exiting, or pid is another process now: see ProcWatch.Dead). pid 0
// names nobody; the calling process is alive, and its pid with another tag
// is an earlier process, dead. Errors count as alive (taking a live
// holder's share is worse than waiting); the Waiter then sleeps in slices.
//
// The watches of a Sleep are those of the processes watched since the one
// before: the caller watches, at each look, every process it waits on.
func (w *Waiter) Watch(pid int, tag uint32) (dead bool) {
	return w.WatchTag(pid, tag, fullTag)
}

// WatchTag is Watch for a tag that holds only the bits mask of the start
// time's low 32 bits.
func (w *Waiter) WatchTag(pid int, tag, mask uint32) (dead bool) {
	if pid <= 0 {
		return false
	}
	if self, err := Self(); err == nil && pid == self.PID {
		return tag&mask != self.Tag()&mask
	}
	k := procKey{pid: pid, tag: tag & mask, mask: mask}
	if watched, dead := w.known(k); watched {
		return dead
	}
	return w.watch(k)
}

// WatchExit is Watch for the process that has pid now, whatever its start
// time, which counts as dead only once it has exited: a process that is
// exiting (SIGKILL pending) still holds its flocks, until its exit closes
// its files.
func (w *Waiter) WatchExit(pid int) (exited bool) {
	if pid <= 0 {
		return false
	}
	p, _, ok, err := LookupProc(pid)
	switch {
	case err != nil:
		return false
	case !ok:
		return true
	}
	k := procKey{pid: pid, tag: p.Tag(), mask: fullTag, group: true}
	if watched, exited := w.known(k); watched {
		return exited
	}
	return w.watch(k)
}

// known looks k up among the Waiter's watches: watched reports that it is
// one (kept for this round), dead that its process has exited (and the
// watch is dropped). A group watch in slices cannot tell an exit from an
// exiting, so it never reports dead: the caller's next look tells.
func (w *Waiter) known(k procKey) (watched, dead bool) {
	r := w.watches[k]
	switch {
	case r == nil:
		return false, false
	case (r.e != nil || !k.group) && r.dead():
		w.drop(k, r)
		return true, true
	}
	r.round = w.round
	return true, false
}

func (w *Waiter) watch(k procKey) (dead bool) {
	if w.watches == nil {
		w.watches = map[procKey]*watchRef{}
	}
	if e, dead, err := subscribe(k, w); err == nil {
		if !dead {
			w.watches[k] = &watchRef{e: e, round: w.round}
		}
		return dead
	}
	p, dead, err := watchProc(k)
	if err != nil || dead {
		return dead && !k.group
	}
	w.watches[k] = &watchRef{p: p, round: w.round}
	return false
}

func (r *watchRef) dead() bool {
	if r.e != nil {
		return r.e.exited()
	}
	dead, err := r.p.Dead()
	return err == nil && dead
}

func (w *Waiter) drop(k procKey, r *watchRef) {
	delete(w.watches, k)
	if r.e != nil {
		unsubscribe(r.e, w)
	} else {
		r.p.Close()
	}
}

// Sleep sleeps while *addr == val (addr in a shared mapping, as for
// FutexWait) until the word is woken, a watched process exits or the
// Waiter is rung. It returns nil also when *addr was not val, when the
// Waiter was rung before, and on EINTR: the caller looks again in every
// case. A ring is consumed by the Sleep it ends.
func (w *Waiter) Sleep(addr *uint32, val uint32) error {
	return w.sleep(addr, val, nil, 0, 0)
}

// SleepFor is Sleep that also ends after d (d > 0): for a caller that
// waits on something no wake-up announces, such as a handoff that may
// never be taken because the process it was meant for died.
func (w *Waiter) SleepFor(addr *uint32, val uint32, d time.Duration) error {
	return w.sleep(addr, val, nil, 0, max(d, 1))
}

// Sleep2 is Sleep on two shared words: it sleeps while *a == av and
// *b == bv, until either is woken.
func (w *Waiter) Sleep2(a *uint32, av uint32, b *uint32, bv uint32) error {
	return w.sleep(a, av, b, bv, 0)
}

// sleep sleeps as Sleep2 (b may be nil), at most d when d > 0.
func (w *Waiter) sleep(addr *uint32, val uint32, b *uint32, bv uint32, d time.Duration) error {
	sliced := noWaitv.Load() || noPidfd.Load()
	if len(w.watches) > 0 {
		for k, r := range w.watches {
			if r.round != w.round && len(w.watches) > keepWatches {
				w.drop(k, r)
				continue
			}
			sliced = sliced || r.e == nil
		}
	}
	w.round++
	var err error
	if !sliced {
		err = w.waitv(addr, val, b, bv, d)
		if err == unix.ENOSYS {
			noWaitv.Store(true)
			sliced = true
		}
	}
	if sliced {
		if w.bell.Load() == 0 {
			slice := fallbackSlice
			if d > 0 {
				slice = min(slice, d)
			}
			_, err = FutexWait(addr, val, slice)
		}
	}
	w.bell.Store(0)
	return err
}

// futex_waitv(2) entry and flags.
type futexWaitv struct {
	val   uint64
	uaddr uint64
	flags uint32
	_     uint32
}

const (
	futex2U32     = 0x02
	futex2Private = 128
	futexPrivate  = 128 // FUTEX_PRIVATE_FLAG of futex(2)
)

// waitv sleeps on the bell being 0, addr == val and, unless b is nil,
// b == bv; at most d when d > 0.
func (w *Waiter) waitv(addr *uint32, val uint32, b *uint32, bv uint32, d time.Duration) error {
	v := [3]futexWaitv{
		{val: 0, uaddr: uint64(uintptr(unsafe.Pointer(&w.bell))), flags: futex2U32 | futex2Private},
		{val: uint64(val), uaddr: uint64(uintptr(unsafe.Pointer(addr))), flags: futex2U32},
		{val: uint64(bv), uaddr: uint64(uintptr(unsafe.Pointer(b))), flags: futex2U32},
	}
	n := 3
	if b == nil {
		n = 2
	}
	var ts *unix.Timespec // futex_waitv's timeout is absolute
	if d > 0 {
		ts = new(unix.Timespec)
		unix.ClockGettime(unix.CLOCK_MONOTONIC, ts)
		*ts = unix.NsecToTimespec(ts.Nano() + int64(d))
	}
	_, _, e := unix.Syscall6(unix.SYS_FUTEX_WAITV, uintptr(unsafe.Pointer(&v[0])), uintptr(n), 0,
		uintptr(unsafe.Pointer(ts)), unix.CLOCK_MONOTONIC, 0)
	runtime.KeepAlive(ts)
	runtime.KeepAlive(w)
	switch e {
	case 0, unix.EAGAIN, unix.EINTR, unix.ETIMEDOUT:
		return nil
	case unix.ENOSYS:
		return unix.ENOSYS
	default:
		return fmt.Errorf("ipc: futex_waitv: %w", e)
	}
}

// Ring ends the Waiter's sleep in progress, or its next one. It may be
// called from any goroutine, at any time (for example by
// context.AfterFunc): a Ring that comes after the call has returned makes
// the next call's first sleep return at once, which callers take for a
// spurious wake-up.
func (w *Waiter) Ring() {
	if w.bell.Swap(1) == 0 {
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&w.bell)), futexWake|futexPrivate, 1, 0, 0, 0)
	}
}

func (w *Waiter) ring() { w.Ring() }

// Close ends the Waiter's watches. The Waiter may be used again.
func (w *Waiter) Close() {
	for k, r := range w.watches {
		w.drop(k, r)
	}
}
