// Package rwlock is a named read-write lock shared by the processes of one
// host, on one System V semaphore set per name. It heads the family of
// same-host read-write locks: package rwlock/shmrw is the one in shared
// memory (the local Backend's default), and package filelock has one on
// flock(2).
//
// The set has three semaphores: W (1 while a writer holds), R (the number
// of readers holding) and WW (the number of writers waiting). A reader takes
// the lock in one semop that waits for WW = 0 and W = 0 and adds one to R; a
// writer first adds one to WW and then, in one semop, waits for W = 0 and
// R = 0, sets W and takes its one back from WW. So writers are preferred:
// once a writer waits, new readers wait behind it, and a stream of readers
// cannot starve a writer. Writers may starve readers.
//
// Every operation is made with SEM_UNDO, so the kernel reverses what a
// process still holds or has registered when it ends, however it ends: a
// SIGKILLed holder frees the lock, and a writer SIGKILLed while waiting
// takes its one back from WW, so readers do not wait for a writer that
// will never come. Downgrade (write to read) is one semop that clears W and
// adds to R: no other writer can come in between.
//
// Writers get a fencing token from a counter kept in the name's record file
// in the namespace, incremented while the write lock is held, so tokens are
// strictly increasing across processes. Readers get the token 0.
//
// A Lock is a driver.Lock: applications normally use it through a
// baton.Backend (package local), which adds the queueing of goroutines that
// share a handle, owners and reentrancy.
//
// What failures leave behind: a failed or cancelled acquisition holds
// nothing and is no longer registered as waiting. The set outlives every
// process until Remove (or ipcrm); Remove while the lock is held fires the
// loss of the holds in it (the handle checks its set every ipc.WatchEvery)
// and makes their Release fail with baton.ErrLost; the handle's next
// acquisition, like the next Open, uses a new, free lock.
package rwlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// Semaphores of the set.
const (
	semW  = 0 // 1 while a writer holds
	semR  = 1 // readers holding
	semWW = 2 // writers waiting
	nsems = 3
)

// Lock is one handle on a named read-write lock. The zero value is not
// usable; use Open. The methods of driver.Lock may be called by one
// goroutine at a time (the baton core does so), and the handle holds at most
// one grant at a time.
type Lock struct {
	set *ipc.NamedSet
}

var _ driver.Lock = (*Lock)(nil)

// Open opens the lock called name in ns, creating it, free, when it does not
// exist. A bad name gives an error matching baton.ErrInvalidName and
// creates nothing.
func Open(ns *ipc.Namespace, name string) (*Lock, error) {
	return ipc.Open(ns, ipc.KindSysvRW, name, OpenEntry)
}

// OpenEntry is Open for a name already resolved in its namespace (by
// Namespace.Entry or Namespace.Resolve, of kind ipc.KindSysvRW); it does not
// validate the name again.
func OpenEntry(e ipc.Entry) (*Lock, error) {
	set, err := ipc.OpenNamedSet(e, ipc.KindSysvRW, "rwlock", nsems, 0, func(set *ipc.SemSet) error {
		// A no-op semop sets sem_otime: the set is initialised (all
		// zero: free, no writer waiting).
		return set.TryOp([]ipc.SemOp{{Num: semW, Op: 0}})
	})
	if err != nil {
		return nil, err
	}
	return &Lock{set: set}, nil
}

// Name returns the name the handle was opened with.
func (l *Lock) Name() string { return l.set.Entry().Name() }

// Acquire takes the lock in mode, waiting until it can or until ctx is done;
// then it returns an error matching ctx.Err(), holds nothing and is no
// longer counted as a waiting writer.
func (l *Lock) Acquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return l.acquire(ctx, mode, true)
}

// TryFirst tells the core that TryAcquire is one non-blocking semop, cheap
// enough to try before it sets up a cancellable wait.
func (l *Lock) TryFirst() bool { return true }

// TryAcquire takes the lock in mode if it can at once, and otherwise returns
// an error matching baton.ErrLocked. A reader fails too when a writer waits.
func (l *Lock) TryAcquire(ctx context.Context, mode driver.Mode) (driver.Grant, error) {
	return l.acquire(ctx, mode, false)
}

func (l *Lock) acquire(ctx context.Context, mode driver.Mode, wait bool) (driver.Grant, error) {
	inc, err := l.set.Current()
	if err != nil {
		return driver.Grant{}, err
	}
	for range ipc.ReopenTries {
		var g driver.Grant
		if mode == driver.Shared {
			g, err = l.rlock(ctx, inc, wait)
		} else {
			g, err = l.wlock(ctx, inc, wait)
		}
		if err == nil || !errors.Is(err, ipc.ErrRemoved) {
			return g, err
		}
		if inc, err = l.set.Reopen(inc); err != nil {
			return driver.Grant{}, err
		}
	}
	return driver.Grant{}, l.set.ErrChurn(err)
}

func (l *Lock) rlock(ctx context.Context, inc *ipc.SetIncarnation, wait bool) (driver.Grant, error) {
	ops := [3]ipc.SemOp{
		{Num: semWW, Op: 0},
		{Num: semW, Op: 0},
		{Num: semR, Op: 1, Flags: ipc.SemUndo},
	}
	if err := inc.Set.Do(ctx, ops[:], wait); err != nil {
		if errors.Is(err, ipc.ErrWouldBlock) {
			return driver.Grant{}, fmt.Errorf("read: %w", baton.ErrLocked)
		}
		return driver.Grant{}, err
	}
	return driver.Grant{Data: inc.Grant(driver.Shared), Loss: inc.Loss}, nil
}

func (l *Lock) wlock(ctx context.Context, inc *ipc.SetIncarnation, wait bool) (driver.Grant, error) {
	fast := [3]ipc.SemOp{
		{Num: semW, Op: 0},
		{Num: semR, Op: 0},
		{Num: semW, Op: 1, Flags: ipc.SemUndo},
	}
	err := inc.Set.TryOp(fast[:])
	if errors.Is(err, ipc.ErrWouldBlock) {
		if !wait {
			return driver.Grant{}, fmt.Errorf("write: %w", baton.ErrLocked)
		}
		err = l.wlockSlow(ctx, inc)
	}
	if err != nil {
		return driver.Grant{}, err
	}
	tok, err := inc.NextCounter()
	if err != nil {
		l.unlock(inc, driver.Exclusive)
		return driver.Grant{}, fmt.Errorf("fencing token: %w", err)
	}
	return driver.Grant{Token: tok, Data: inc.Grant(driver.Exclusive), Loss: inc.Loss}, nil
}

// wlockSlow registers as a waiting writer (which stops new readers), then
// waits for the lock and leaves the register in the same semop that takes
// it. The register is made with SEM_UNDO, so a writer killed while it waits
// is taken out of it by the kernel.
func (l *Lock) wlockSlow(ctx context.Context, inc *ipc.SetIncarnation) error {
	reg := [1]ipc.SemOp{{Num: semWW, Op: 1, Flags: ipc.SemUndo}}
	if err := inc.Set.TryOp(reg[:]); err != nil {
		return err
	}
	take := [4]ipc.SemOp{
		{Num: semW, Op: 0},
		{Num: semR, Op: 0},
		{Num: semW, Op: 1, Flags: ipc.SemUndo},
		{Num: semWW, Op: -1, Flags: ipc.SemUndo},
	}
	err := inc.Set.Op(ctx, take[:])
	if err != nil {
		unreg := [1]ipc.SemOp{{Num: semWW, Op: -1, Flags: ipc.SemUndo}}
		_ = inc.Set.TryOp(unreg[:]) // fails only if the set is gone
	}
	return err
}

func (l *Lock) unlock(inc *ipc.SetIncarnation, mode driver.Mode) error {
	var ops [1]ipc.SemOp
	if mode == driver.Shared {
		ops[0] = ipc.SemOp{Num: semR, Op: -1, Flags: ipc.SemUndo}
	} else {
		ops[0] = ipc.SemOp{Num: semW, Op: -1, Flags: ipc.SemUndo}
	}
	if err := inc.Set.TryOp(ops[:]); err != nil {
		if errors.Is(err, ipc.ErrWouldBlock) {
			// The value is already 0: someone reset the set.
			return fmt.Errorf("%w: the lock is not held in the set", baton.ErrLost)
		}
		return err
	}
	return nil
}

func (l *Lock) grantOf(g driver.Grant) (*ipc.SetGrant, error) {
	return driver.DataOf[ipc.SetGrant](g)
}

// Release releases grant g. If the set of g was removed meanwhile, it
// returns an error matching baton.ErrLost.
func (l *Lock) Release(ctx context.Context, g driver.Grant) error {
	h, err := l.grantOf(g)
	if err != nil {
		return err
	}
	return l.unlock(h.Inc, h.Mode)
}

// Downgrade turns the exclusive grant g into a shared one in one semop:
// the write lock is never free in between. The shared grant keeps g's
// token.
func (l *Lock) Downgrade(ctx context.Context, g driver.Grant) (driver.Grant, error) {
	h, err := l.grantOf(g)
	if err != nil {
		return driver.Grant{}, err
	}
	if h.Mode != driver.Exclusive {
		return driver.Grant{}, fmt.Errorf("downgrade of a read lock: %w", baton.ErrNotHeld)
	}
	ops := [2]ipc.SemOp{
		{Num: semW, Op: -1, Flags: ipc.SemUndo},
		{Num: semR, Op: 1, Flags: ipc.SemUndo},
	}
	if err := h.Inc.Set.TryOp(ops[:]); err != nil {
		if errors.Is(err, ipc.ErrWouldBlock) {
			return driver.Grant{}, fmt.Errorf("%w: the write lock is not held in the set", baton.ErrLost)
		}
		return driver.Grant{}, err
	}
	return driver.Grant{Token: g.Token, Data: h.Inc.Grant(driver.Shared), Loss: h.Inc.Loss}, nil
}

// Token returns the last fencing token given to a writer.
func (l *Lock) Token() (baton.Token, error) {
	inc, err := l.set.Current()
	if err != nil {
		return 0, err
	}
	v, err := inc.Counter()
	return baton.Token(v), err
}

// Close closes the handle. A grant still held stays held until released or
// until the process ends.
func (l *Lock) Close() error { return l.set.Close() }
