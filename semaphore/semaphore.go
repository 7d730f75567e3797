// Package semaphore is a named, weighted counting semaphore shared by the
// processes of one host, on a System V semaphore set. It heads the family
// of same-host semaphores: package semaphore/shmsem is the one in shared
// memory (the local Backend's default).
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
// while permits are held fires the loss of their grants (the handle checks
// its set every ipc.WatchEvery) and makes their Release fail with
// baton.ErrLost; the handle's next Acquire, like the next Open, uses a new
// set with all permits free.
package semaphore

import (
	"context"
	"errors"
	"fmt"

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
	set      *ipc.NamedSet
	capacity int64
}

var _ driver.Semaphore = (*Sem)(nil)

// Open opens the semaphore called name in ns, creating it with permits
// permits (1 to MaxPermits) when it does not exist. Bad arguments give errors
// matching baton.ErrInvalidName or baton.ErrInvalidArgument and create
// nothing; an existing semaphore of another capacity gives an error
// matching baton.ErrMismatch.
func Open(ns *ipc.Namespace, name string, permits int64) (*Sem, error) {
	return ipc.Open(ns, ipc.KindSysvSem, name, func(e ipc.Entry) (*Sem, error) { return OpenEntry(e, permits) })
}

// OpenEntry is Open for a name already resolved in its namespace (by
// Namespace.Entry or Namespace.Resolve, of kind ipc.KindSysvSem); it does
// not validate the name again.
func OpenEntry(e ipc.Entry, permits int64) (*Sem, error) {
	if err := baton.ValidatePermits(permits, 0); err != nil {
		return nil, err
	}
	if permits > MaxPermits {
		return nil, fmt.Errorf("%w: %d permits, a System V semaphore holds at most %d", baton.ErrInvalidArgument, permits, MaxPermits)
	}
	set, err := ipc.OpenNamedSet(e, ipc.KindSysvSem, "semaphore", 1, permits, func(set *ipc.SemSet) error {
		// The first semop both puts the permits in and sets sem_otime,
		// which marks the set as initialised.
		return set.TryOp([]ipc.SemOp{{Num: 0, Op: int16(permits)}})
	})
	if err != nil {
		return nil, err
	}
	return &Sem{set: set, capacity: permits}, nil
}

// Capacity returns the number of permits of the semaphore.
func (s *Sem) Capacity() int64 { return s.capacity }

// Name returns the name the handle was opened with.
func (s *Sem) Name() string { return s.set.Entry().Name() }

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
	inc, err := s.set.Current()
	if err != nil {
		return driver.Grant{}, err
	}
	for range ipc.ReopenTries {
		ops := [1]ipc.SemOp{{Num: 0, Op: -int16(n), Flags: ipc.SemUndo}}
		err = inc.Set.Do(ctx, ops[:], wait)
		if err == nil {
			return driver.Grant{N: n, Data: inc, Loss: inc.Loss}, nil
		}
		if errors.Is(err, ipc.ErrWouldBlock) {
			return driver.Grant{}, fmt.Errorf("%d permits: %w", n, baton.ErrLocked)
		}
		if !errors.Is(err, ipc.ErrRemoved) {
			return driver.Grant{}, err
		}
		if inc, err = s.set.Reopen(inc); err != nil {
			return driver.Grant{}, err
		}
	}
	return driver.Grant{}, s.set.ErrChurn(err)
}

// Release gives back n of the permits of grant g. If the set of g was
// removed meanwhile, it returns an error matching baton.ErrLost and changes
// nothing else.
func (s *Sem) Release(ctx context.Context, g driver.Grant, n int64) error {
	if n <= 0 || n > g.N {
		return fmt.Errorf("release %d of a grant of %d: %w", n, g.N, baton.ErrNotHeld)
	}
	inc, err := driver.DataOf[ipc.SetIncarnation](g)
	if err != nil {
		return err
	}
	ops := [1]ipc.SemOp{{Num: 0, Op: int16(n), Flags: ipc.SemUndo}}
	if err := inc.Set.TryOp(ops[:]); err != nil {
		return err
	}
	return nil
}

// Available returns the number of free permits now.
func (s *Sem) Available() (int64, error) {
	inc, err := s.set.Current()
	if err != nil {
		return 0, err
	}
	v, err := inc.Set.Value(0)
	return int64(v), err
}

// Close closes the handle. Permits still held stay held until released or
// until the process ends.
func (s *Sem) Close() error { return s.set.Close() }
