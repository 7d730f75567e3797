// Package local is baton's same-host Backend: named primitives shared by
// the processes of one machine through a namespace directory.
//
// The namespace directory defaults to $XDG_RUNTIME_DIR/baton, or
// /dev/shm/baton-UID when XDG_RUNTIME_DIR is unset (both per user, on tmpfs).
// Every name maps injectively onto one file under DIR/KIND/ (see
// ipc.EncodeName); no name can reach outside the directory. The core
// validates a name before any Open; the backend then encodes it once and
// hands the mechanism packages the resolved path or ipc.Entry.
//
// Mechanisms, chosen per primitive by option:
//
//	Mutex      a futex word in shared memory with owner-death recovery
//	           (MutexFutex), or flock(2) on a file (MutexFlock)
//	RWMutex    a read-write lock in shared memory with per-handle slots
//	           and owner-death recovery (RWShm), a System V semaphore set
//	           (RWSysV), or flock(2) on a data and a gate file (RWFlock)
//	Semaphore  a weighted semaphore in shared memory with per-handle slots
//	           and owner-death recovery (SemShm), or a System V semaphore
//	           with SEM_UNDO (SemSysV)
//	Cond       one futex word per waiter slot in shared memory
//	Value      a version word and two data slots in shared memory, written
//	           with a CAS of the version (package shmvalue)
//	Queue      job slots in shared memory under a robust lock, claims
//	           recorded by process and given back when it exits (package
//	           shmqueue; its limits are stated there)
//	rate limit one lock-free word in shared memory, for package recipe's
//	           RateLimiter (OpenRateStore, package shmrate)
//
// Holds are given back when their process dies: by the kernel for flock and
// System V (SEM_UNDO), by the next waiter's owner-liveness check for the
// futex mutex and the shared-memory RW lock and semaphore.
//
// Handles are cheap and idle names leave nothing: the handles of a name in
// a process share one mapping of its file, and the last handle of the host
// to close removes the file of a futex Mutex, shared-memory RWMutex or
// Semaphore, or Cond when nobody holds or waits (a dead process's hold
// stays, for a waiter to recover), and the file of a flock Mutex when
// nobody holds it. Tokens keep increasing per name across these reclaims
// (a token floor per namespace, the file "tokens"). What stays: a Value
// once written (it is state, like a file), the flock RWMutex's two files,
// and the System V mechanisms' sets and records, which live until removed
// (baton rm); see ARCHITECTURE.md for why.

// Channels are a ring of message slots in shared memory (package shmchan);
// a slot that a killed sender or receiver held is recovered by the next
// process that waits behind it.
package local

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/condvar"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/filelock"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local/mutex"
	"github.com/batonlock/baton/local/shmqueue"
	"github.com/batonlock/baton/local/shmvalue"
	"github.com/batonlock/baton/rwlock"
	"github.com/batonlock/baton/rwlock/shmrw"
	"github.com/batonlock/baton/semaphore"
	"github.com/batonlock/baton/semaphore/shmsem"
)

// MutexImpl selects the mechanism of Mutex handles.
type MutexImpl string

// RWImpl selects the mechanism of RWMutex handles.
type RWImpl string

// SemImpl selects the mechanism of Semaphore handles.
type SemImpl string

const (
	MutexFutex MutexImpl = "futex" // futex word in shared memory, owner-death recovery
	MutexFlock MutexImpl = "flock" // flock(2) on a file in the namespace
	RWShm      RWImpl    = "shm"   // shared memory, per-handle slots, owner-death recovery
	RWSysV     RWImpl    = "sysv"  // System V semaphore set, SEM_UNDO
	RWFlock    RWImpl    = "flock" // flock(2) on a data and a gate file
	SemShm     SemImpl   = "shm"   // shared memory, per-handle slots, owner-death recovery
	SemSysV    SemImpl   = "sysv"  // System V semaphore, SEM_UNDO
)

// Option configures Open.
type Option func(*options) error

type options struct {
	mutex  MutexImpl
	rw     RWImpl
	sem    SemImpl
	linger time.Duration
}

// WithMutex selects the Mutex mechanism. Default: MutexFutex.
func WithMutex(impl MutexImpl) Option {
	return func(o *options) error { return pick(&o.mutex, impl, "mutex", MutexFlock, MutexFutex) }
}

// WithRWMutex selects the RWMutex mechanism. Default: RWShm.
func WithRWMutex(impl RWImpl) Option {
	return func(o *options) error { return pick(&o.rw, impl, "rwmutex", RWShm, RWFlock, RWSysV) }
}

// WithSemaphore selects the Semaphore mechanism. Default: SemShm.
func WithSemaphore(impl SemImpl) Option {
	return func(o *options) error { return pick(&o.sem, impl, "semaphore", SemShm, SemSysV) }
}

// WithLinger sets how long the file of a name stays open and mapped in
// the process after its last handle here is closed, so that a handle
// opened on the name again meanwhile costs no system call (a lock per
// request on a recurring id); the file is then reclaimed if idle, off the
// caller's path. 0 reclaims it at the last Close. Default:
// ipc.DefaultLinger; at most a minute. Backend.Close ends every linger.
func WithLinger(d time.Duration) Option {
	return func(o *options) error {
		if err := ipc.CheckLinger(d); err != nil {
			return fmt.Errorf("local: %w", err)
		}
		o.linger = d
		return nil
	}
}

// pick sets *dst to impl, one of known.
func pick[T ~string](dst *T, impl T, what string, known ...T) error {
	if !slices.Contains(known, impl) {
		return fmt.Errorf("%w: local: unknown %s mechanism %q", baton.ErrInvalidArgument, what, impl)
	}
	*dst = impl
	return nil
}

// Open returns the same-host Backend over the namespace directory dir
// ("" for the default), creating the directory (mode 0700) when missing.
// Options are validated before anything is created.
func Open(dir string, opts ...Option) (baton.Backend, error) {
	o := options{mutex: MutexFutex, rw: RWShm, sem: SemShm, linger: ipc.DefaultLinger}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: local: nil option", baton.ErrInvalidArgument)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	ns, err := ipc.OpenNamespace(dir)
	if err != nil {
		return nil, err
	}
	if err := ns.SetLinger(o.linger); err != nil {
		return nil, err
	}
	return baton.NewBackend(&backend{ns: ns, o: o}), nil
}

// Kind directories in the namespace.
const (
	kindFlock   = "flock"   // Mutex on flock
	kindRWFlock = "rwflock" // RWMutex on flock (data file; gate beside it)
	gateSuffix  = "%gate"   // never part of an encoded name ('%' is followed by hex there)
)

type backend struct {
	ns *ipc.Namespace
	o  options
}

func (d *backend) Kind() string { return "local" }

// ValidateName checks what the namespace adds to baton.ValidateName, which
// the core has run already: the length of the encoded name.
func (d *backend) ValidateName(name string) error { return ipc.CheckEncodedLen(name) }

// path returns the file of name among kind, for a name the core has
// validated: it is encoded here once, and not checked again.
func (d *backend) path(kind, name string) (string, error) {
	if err := d.ns.EnsureKind(kind); err != nil {
		return "", err
	}
	return d.ns.Resolve(kind, name).Path(), nil
}

func (d *backend) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	if d.o.mutex == MutexFutex {
		return mutex.OpenEntry(d.ns.Resolve(mutex.Kind, name))
	}
	p, err := d.path(kindFlock, name)
	if err != nil {
		return nil, err
	}
	return filelock.OpenMutexIn(d.ns, p)
}

func (d *backend) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	switch d.o.rw {
	case RWShm:
		return shmrw.Open(d.ns, name)
	case RWSysV:
		return rwlock.OpenEntry(d.ns.Resolve(ipc.KindSysvRW, name))
	}
	p, err := d.path(kindRWFlock, name)
	if err != nil {
		return nil, err
	}
	return filelock.OpenRWMutex(p, p+gateSuffix)
}

func (d *backend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	if d.o.sem == SemShm {
		return shmsem.Open(d.ns, name, permits)
	}
	return semaphore.OpenEntry(d.ns.Resolve(ipc.KindSysvSem, name), permits)
}

func (d *backend) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	return condvar.OpenEntry(d.ns.Resolve(condvar.Kind, name))
}

// OpenValue opens a versioned value (driver.ValueOpener).
func (d *backend) OpenValue(ctx context.Context, name string) (driver.Value, error) {
	return shmvalue.OpenEntry(d.ns.Resolve(shmvalue.Kind, name))
}

var _ driver.ValueOpener = (*backend)(nil)

// OpenQueue opens a work queue (driver.QueueOpener).
func (d *backend) OpenQueue(ctx context.Context, name string) (driver.Queue, error) {
	return shmqueue.OpenEntry(d.ns.Resolve(shmqueue.Kind, name))
}

var _ driver.QueueOpener = (*backend)(nil)

// Close ends the linger of the files this process opened in the namespace
// (WithLinger): what idle names leave is gone when it returns.
func (d *backend) Close() error {
	ipc.ReclaimIdle(d.ns)
	return nil
}
