// Package semaphore is a named, weighted counting semaphore shared by the
// processes of one host, on a System V semaphore set.
//
// Every Acquire is made with SEM_UNDO: when a process ends, however it ends
// (SIGKILL and OOM included), the kernel gives back the permits it still
// held. The capacity is fixed when the name is first created and recorded
// beside it in the namespace; an opener that asks for another capacity gets
// an error matching baton.ErrMismatch rather than a second, silent limit.
//
// A Sem is a driver.Semaphore: applications normally use it through a
// baton.Backend (package local), which adds FIFO queueing of the goroutines
// that share a handle and the accounting of what each holds. Used directly,
// a Sem does not check that Release gives back only what was acquired.
//
// What failures leave behind: a failed or cancelled Acquire holds nothing.
// The System V set outlives every process until Remove (or ipcrm); Remove
// while permits are held makes their Release fail with baton.ErrLost, and the
// next Open creates a new set with all permits free.
package semaphore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// MaxPermits is the largest capacity: the largest value of a System V
// semaphore.
const MaxPermits = ipc.SemValueMax

// Sem is one handle on a named semaphore. The zero value is not usable; use
// Open. A Sem is safe for concurrent use.
type Sem struct {
	ns       *ipc.Namespace
	name     string
	capacity int64

	mu     sync.Mutex                 // serialises open, reopen and Close
	obj    *ipc.Object                // the record in use; guarded by mu
	set    atomic.Pointer[ipc.SemSet] // obj's set; replaced under mu
	cur    atomic.Pointer[watchedSet] // set with its loss; replaced under mu
	stop   func()                     // ends the watch of cur; guarded by mu
	closed atomic.Bool                // set under mu
}

// watchedSet is a set and the loss that fires when it is removed (baton rm,
// Remove): every grant on the set carries it.
type watchedSet struct {
	set  *ipc.SemSet
	loss *driver.Loss
}

var errSetRemoved = errors.New("System V set removed")

// lossFor returns the loss of set, which the handle used for a grant; if the
// handle has moved to another set meanwhile, set was removed.
func (s *Sem) lossFor(set *ipc.SemSet) *driver.Loss {
	if w := s.cur.Load(); w != nil && w.set == set {
		return w.loss
	}
	l := driver.NewLoss()
	l.Fire(errSetRemoved)
	return l
}

var _ driver.Semaphore = (*Sem)(nil)

// Open opens the semaphore called name in ns, creating it with permits
// permits (1 to MaxPermits) when it does not exist. Bad arguments give errors
// matching baton.ErrInvalidName or baton.ErrInvalidArgument and create
// nothing; an existing semaphore of another capacity gives an error matching
// baton.ErrMismatch.
func Open(ns *ipc.Namespace, name string, permits int64) (*Sem, error) {
	if err := ns.Check(name); err != nil {
		return nil, err
	}
	if err := baton.ValidatePermits(permits, 0); err != nil {
		return nil, err
	}
	if permits > MaxPermits {
		return nil, fmt.Errorf("%w: %d permits, a System V semaphore holds at most %d", baton.ErrInvalidArgument, permits, MaxPermits)
	}
	s := &Sem{ns: ns, name: name, capacity: permits}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

// open resolves the name to its set, creating it if needed. s.mu is held or
// s is not shared yet.
func (s *Sem) open() error {
	obj, err := ipc.OpenSemObject(s.ns, ipc.KindSysvSem, s.name, 1, s.capacity, func(set *ipc.SemSet) error {
		// The first semop both puts the permits in and sets sem_otime,
		// which marks the set as initialised.
		return set.TryOp([]ipc.SemOp{{Num: 0, Op: int16(s.capacity)}})
	})
	if err != nil {
		return fmt.Errorf("semaphore %q: %w", s.name, err)
	}
	if s.obj != nil {
		s.obj.Close()
	}
	s.obj = obj
	set := obj.Sem()
	w := &watchedSet{set: set, loss: driver.NewLoss()}
	id, key := obj.ID, obj.Key
	stop := ipc.WatchLoss(func() error {
		if st, err := ipc.StatSemSet(id); err != nil || st.Key != key {
			return errSetRemoved
		}
		return nil
	}, w.loss)
	if old := s.cur.Swap(w); old != nil {
		// Replaced because its set was removed: its grants are lost.
		old.loss.Fire(errSetRemoved)
		s.stop()
	}
	s.stop = stop
	s.set.Store(set)
	return nil
}

// current returns the set in use, or ErrClosed.
func (s *Sem) current() (*ipc.SemSet, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("semaphore %q: %w", s.name, baton.ErrClosed)
	}
	return s.set.Load(), nil
}

// reopen replaces set, found removed, by the set the name now stands for
// (creating one). It returns the set to use.
func (s *Sem) reopen(set *ipc.SemSet) (*ipc.SemSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, fmt.Errorf("semaphore %q: %w", s.name, baton.ErrClosed)
	}
	if cur := s.set.Load(); cur != set {
		return cur, nil
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.set.Load(), nil
}

// Capacity returns the number of permits of the semaphore.
func (s *Sem) Capacity() int64 { return s.capacity }

// Name returns the name the handle was opened with.
func (s *Sem) Name() string { return s.name }

func (s *Sem) checkN(n int64) error {
	return baton.ValidatePermits(n, s.capacity)
}

// Acquire waits until n permits are free and takes them, or until ctx is
// done; then it returns an error matching ctx.Err() and holds nothing. If
// the set was removed while waiting, Acquire waits on the set the name
// stands for now.
func (s *Sem) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	return s.acquire(ctx, n, true)
}

// TryFirst tells the core that TryAcquire is one non-blocking semop, cheap
// enough to try before it sets up a cancellable wait.
func (s *Sem) TryFirst() bool { return true }

// TryAcquire takes n permits if they are free now, and otherwise returns an
// error matching baton.ErrLocked.
func (s *Sem) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	return s.acquire(ctx, n, false)
}

func (s *Sem) acquire(ctx context.Context, n int64, wait bool) (driver.Grant, error) {
	if err := s.checkN(n); err != nil {
		return driver.Grant{}, err
	}
	set, err := s.current()
	if err != nil {
		return driver.Grant{}, err
	}
	for range 8 {
		ops := [1]ipc.SemOp{{Num: 0, Op: -int16(n), Flags: ipc.SemUndo}}
		err = set.TryOp(ops[:])
		if errors.Is(err, ipc.ErrWouldBlock) {
			if !wait {
				return driver.Grant{}, fmt.Errorf("semaphore %q: %d permits: %w", s.name, n, baton.ErrLocked)
			}
			err = set.Op(ctx, ops[:])
		}
		if err == nil {
			return driver.Grant{N: n, Data: set, Loss: s.lossFor(set)}, nil
		}
		if !errors.Is(err, ipc.ErrRemoved) {
			return driver.Grant{}, fmt.Errorf("semaphore %q: %w", s.name, err)
		}
		if set, err = s.reopen(set); err != nil {
			return driver.Grant{}, err
		}
	}
	return driver.Grant{}, fmt.Errorf("semaphore %q: the set keeps being removed: %w", s.name, err)
}

// Release gives back n of the permits of grant g. If the set of g was
// removed meanwhile, it returns an error matching baton.ErrLost and changes
// nothing else.
func (s *Sem) Release(ctx context.Context, g driver.Grant, n int64) error {
	if n <= 0 || n > g.N {
		return fmt.Errorf("semaphore %q: release %d of a grant of %d: %w", s.name, n, g.N, baton.ErrNotHeld)
	}
	set, ok := g.Data.(*ipc.SemSet)
	if !ok {
		return fmt.Errorf("semaphore %q: %w: grant of another driver", s.name, baton.ErrInvalidArgument)
	}
	ops := [1]ipc.SemOp{{Num: 0, Op: int16(n), Flags: ipc.SemUndo}}
	if err := set.TryOp(ops[:]); err != nil {
		return fmt.Errorf("semaphore %q: %w", s.name, err)
	}
	return nil
}

// Available returns the number of free permits now.
func (s *Sem) Available() (int64, error) {
	set, err := s.current()
	if err != nil {
		return 0, err
	}
	v, err := set.Value(0)
	return int64(v), err
}

// Close closes the handle. Permits still held stay held until released or
// until the process ends.
func (s *Sem) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	s.closed.Store(true)
	s.stop()
	return s.obj.Close()
}
