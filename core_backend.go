package baton

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/closing"
)

// NewBackend wraps a driver.Backend in the core, which gives every backend the
// same user-visible semantics: validation before any side effect, goroutines
// sharing a handle queued in FIFO order, owners and hold counts, writer
// preference, ErrNotHeld, ErrUpgrade, ErrClosed. If d implements Inspector,
// so does the returned Backend.
func NewBackend(d driver.Backend) Backend {
	b := &coreBackend{d: d, kind: d.Kind(), locks: make(map[*lockHandle]struct{}), others: make(map[closer]struct{})}
	if in, ok := d.(Inspector); ok {
		return &inspectingBackend{coreBackend: b, in: in}
	}
	return b
}

type coreBackend struct {
	d    driver.Backend
	kind string // d.Kind()

	mu     sync.Mutex
	closed bool // guarded by mu
	// Open handles, guarded by mu. Mutex and RWMutex handles, the most
	// numerous, have a map of their own, whose pointer keys take half the
	// room of an interface.
	locks  map[*lockHandle]struct{}
	others map[closer]struct{}
	lines  map[string]*passLine // pass lines of Mutex names; guarded by mu

	obs atomic.Pointer[observerRef] // the Observer (observe.go); nil: none
}

// closer is an open handle of the core.
type closer interface {
	close() error                    // a bare cause
	fail(op string, err error) error // wraps a cause in the handle's *Error
}

// fail wraps the cause of a failed op on a name (kind "" and name "": on
// the Backend itself) in one *Error, and reports it to the Observer.
func (b *coreBackend) fail(op string, kind Kind, name string, err error) error {
	return b.failed(op, kind, name, err)
}

func (b *coreBackend) validate(ctx context.Context, name string) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := b.d.ValidateName(name); err != nil {
		if !errors.Is(err, ErrInvalidName) {
			err = fmt.Errorf("%w: %w", ErrInvalidName, err)
		}
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	return nil
}

// register records an open handle; it refuses (and closes the handle) if the
// backend was closed meanwhile.
func (b *coreBackend) register(h closer) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = h.close()
		return ErrClosed
	}
	if l, ok := h.(*lockHandle); ok {
		b.locks[l] = struct{}{}
	} else {
		b.others[h] = struct{}{}
	}
	b.mu.Unlock()
	return nil
}

func (b *coreBackend) forget(key closer) {
	b.mu.Lock()
	if h, ok := key.(*lockHandle); ok {
		delete(b.locks, h)
		if h.line != nil {
			if h.line.refs--; h.line.refs == 0 {
				delete(b.lines, h.name)
			}
		}
	} else {
		delete(b.others, key)
	}
	b.mu.Unlock()
}

// joinLine returns the pass line of a Mutex name, for a new handle.
func (b *coreBackend) joinLine(name string) *passLine {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lines[name]
	if l == nil {
		if b.lines == nil {
			b.lines = make(map[string]*passLine)
		}
		l = &passLine{}
		b.lines[name] = l
	}
	l.refs++
	return l
}

func (b *coreBackend) Mutex(ctx context.Context, name string) (Mutex, error) {
	h, err := b.openLock(ctx, KindMutex, name)
	if err != nil {
		return nil, b.fail("open", KindMutex, name, err)
	}
	return mutexHandle{h}, nil
}

func (b *coreBackend) RWMutex(ctx context.Context, name string) (RWMutex, error) {
	h, err := b.openLock(ctx, KindRWMutex, name)
	if err != nil {
		return nil, b.fail("open", KindRWMutex, name, err)
	}
	return rwHandle{h}, nil
}

func (b *coreBackend) openLock(ctx context.Context, kind Kind, name string) (*lockHandle, error) {
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	open := b.d.OpenMutex
	if kind == KindRWMutex {
		open = b.d.OpenRWMutex
	}
	d, err := open(ctx, name)
	if err != nil {
		return nil, err
	}
	var line *passLine
	if _, ok := d.(driver.Passer); ok && kind == KindMutex {
		line = b.joinLine(name)
	}
	h := newLockHandle(b, kind, name, d, line)
	if err := b.register(h); err != nil {
		return nil, err
	}
	return h, nil
}

func (b *coreBackend) Semaphore(ctx context.Context, name string, permits int64) (Semaphore, error) {
	s, err := b.openSemaphore(ctx, name, permits)
	if err != nil {
		return nil, b.fail("open", KindSemaphore, name, err)
	}
	return s, nil
}

func (b *coreBackend) openSemaphore(ctx context.Context, name string, permits int64) (*semHandle, error) {
	if err := ValidatePermits(permits, 0); err != nil {
		return nil, err
	}
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	d, err := b.d.OpenSemaphore(ctx, name, permits)
	if err != nil {
		if errors.Is(err, ErrMismatch) {
			err = b.capacityMismatch(ctx, name, permits, err)
		}
		return nil, err
	}
	s := &semHandle{b: b, name: name, capacity: permits, d: d}
	if pc, ok := d.(driver.PermitCounter); ok {
		s.pool, s.poolLoss = pc, pc.PermitLoss()
	}
	if err := b.register(s); err != nil {
		return nil, err
	}
	return s, nil
}

// capacityMismatch returns the driver's ErrMismatch for a semaphore as a
// *MismatchError naming the existing capacity, which it asks the driver for
// if the driver did not say: every backend reports the clash in one text.
func (b *coreBackend) capacityMismatch(ctx context.Context, name string, permits int64, err error) error {
	var me *MismatchError
	if errors.As(err, &me) {
		return err
	}
	me = &MismatchError{Param: "capacity", Want: permits, Err: err}
	if in, ok := b.d.(Inspector); ok {
		if info, ierr := in.Inspect(ctx, KindSemaphore, name); ierr == nil && info.Capacity != permits {
			me.Have = info.Capacity
		}
	}
	return me
}

func (b *coreBackend) Cond(ctx context.Context, name string) (Cond, error) {
	if err := b.validate(ctx, name); err != nil {
		return nil, b.fail("open", KindCond, name, err)
	}
	d, err := b.d.OpenCond(ctx, name)
	if err != nil {
		return nil, b.fail("open", KindCond, name, err)
	}
	c := &condHandle{b: b, name: name, d: d}
	if err := b.register(c); err != nil {
		return nil, b.fail("open", KindCond, name, err)
	}
	return c, nil
}

// Close closes every handle the backend opened (releasing their holds), then
// the driver. Later calls return nil. The error joins those of the
// handles' Close and the driver's.
func (b *coreBackend) Close() error {
	var handles []closer
	if !closing.First(&b.mu, &b.closed, func() {
		handles = make([]closer, 0, len(b.locks)+len(b.others))
		for h := range b.locks {
			handles = append(handles, h)
		}
		for h := range b.others {
			handles = append(handles, h)
		}
		clear(b.locks)
		clear(b.others)
	}) {
		return nil
	}
	var errs []error
	for _, h := range handles {
		if err := h.close(); err != nil {
			errs = append(errs, h.fail("close", err))
		}
	}
	if err := b.d.Close(); err != nil {
		errs = append(errs, b.fail("close", "", "", err))
	}
	return errors.Join(errs...)
}

// inspectingBackend is a Backend whose driver implements Inspector.
type inspectingBackend struct {
	*coreBackend
	in Inspector
}

func (b *inspectingBackend) List(ctx context.Context) ([]Info, error) {
	if ctx == nil {
		return nil, b.fail("list", "", "", errNilContext)
	}
	infos, err := b.in.List(ctx)
	return infos, b.fail("list", "", "", err)
}

func (b *inspectingBackend) Inspect(ctx context.Context, kind Kind, name string) (Info, error) {
	if err := b.validate(ctx, name); err != nil {
		return Info{}, b.fail("inspect", kind, name, err)
	}
	if err := b.serves(kind); err != nil {
		return Info{}, b.fail("inspect", kind, name, err)
	}
	info, err := b.in.Inspect(ctx, kind, name)
	return info, b.fail("inspect", kind, name, err)
}

func (b *inspectingBackend) Remove(ctx context.Context, kind Kind, name string) error {
	if err := b.validate(ctx, name); err != nil {
		return b.fail("remove", kind, name, err)
	}
	if err := b.serves(kind); err != nil {
		return b.fail("remove", kind, name, err)
	}
	return b.fail("remove", kind, name, b.in.Remove(ctx, kind, name))
}

// serves answers a kind the Backend does not serve, before its driver is
// asked: ErrUnsupported for a kind of baton that the driver has no opener
// of (so that a caller asking about every kind, as baton status does, can
// pass over it), ErrInvalidArgument for no kind of baton.
func (b *inspectingBackend) serves(kind Kind) error {
	var ok bool
	switch kind {
	case KindMutex, KindRWMutex, KindSemaphore, KindCond:
		return nil
	case KindValue:
		_, ok = b.d.(driver.ValueOpener)
	case KindQueue:
		_, ok = b.d.(driver.QueueOpener)
	case KindChannel:
		_, ok = b.d.(driver.ChannelOpener)
	default:
		return fmt.Errorf("%w: kind %q", ErrInvalidArgument, kind)
	}
	if !ok {
		return fmt.Errorf("%w: the backend serves no %s", ErrUnsupported, kind)
	}
	return nil
}

var (
	_ Backend   = (*coreBackend)(nil)
	_ Inspector = (*inspectingBackend)(nil)
)
