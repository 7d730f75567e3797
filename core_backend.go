package baton

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/batonlock/baton/driver"
)

// NewBackend wraps a driver.Backend in the core, which gives every backend the
// same user-visible semantics: validation before any side effect, goroutines
// sharing a handle queued in FIFO order, owners and hold counts, writer
// preference, ErrNotHeld, ErrUpgrade, ErrClosed. If d implements Inspector,
// so does the returned Backend.
func NewBackend(d driver.Backend) Backend {
	b := &coreBackend{d: d, handles: make(map[any]func() error)}
	if in, ok := d.(Inspector); ok {
		return &inspectingBackend{coreBackend: b, in: in}
	}
	return b
}

type coreBackend struct {
	d driver.Backend

	mu      sync.Mutex
	closed  bool                 // guarded by mu
	handles map[any]func() error // open handles and their Close; guarded by mu
	lines   map[string]*passLine // pass lines of Mutex names; guarded by mu
}

func (b *coreBackend) validate(ctx context.Context, name string) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
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
		return fmt.Errorf("baton: %s backend: %w", b.d.Kind(), ErrClosed)
	}
	return nil
}

// register records an open handle; it refuses (and closes the handle) if the
// backend was closed meanwhile.
func (b *coreBackend) register(key any, closeFn func() error) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = closeFn()
		return fmt.Errorf("baton: %s backend: %w", b.d.Kind(), ErrClosed)
	}
	b.handles[key] = closeFn
	b.mu.Unlock()
	return nil
}

func (b *coreBackend) forget(key any) {
	b.mu.Lock()
	delete(b.handles, key)
	if h, ok := key.(*lockHandle); ok && h.line != nil {
		if h.line.refs--; h.line.refs == 0 {
			delete(b.lines, h.name)
		}
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
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	d, err := b.d.OpenMutex(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("baton: %s: open mutex %q: %w", b.d.Kind(), name, err)
	}
	var line *passLine
	if _, ok := d.(driver.Passer); ok {
		line = b.joinLine(name)
	}
	h := newLockHandle(b, KindMutex, name, d, line)
	if err := b.register(h, h.close); err != nil {
		return nil, err
	}
	return mutexHandle{h}, nil
}

func (b *coreBackend) RWMutex(ctx context.Context, name string) (RWMutex, error) {
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	d, err := b.d.OpenRWMutex(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("baton: %s: open rwmutex %q: %w", b.d.Kind(), name, err)
	}
	h := newLockHandle(b, KindRWMutex, name, d, nil)
	if err := b.register(h, h.close); err != nil {
		return nil, err
	}
	return rwHandle{h}, nil
}

func (b *coreBackend) Semaphore(ctx context.Context, name string, permits int64) (Semaphore, error) {
	if err := ValidatePermits(permits, 0); err != nil {
		return nil, fmt.Errorf("baton: semaphore %q: %w", name, err)
	}
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	d, err := b.d.OpenSemaphore(ctx, name, permits)
	if err != nil {
		return nil, fmt.Errorf("baton: %s: open semaphore %q: %w", b.d.Kind(), name, err)
	}
	s := &semHandle{b: b, name: name, capacity: permits, d: d}
	s.idle = sync.NewCond(&s.mu)
	if err := b.register(s, s.Close); err != nil {
		return nil, err
	}
	return s, nil
}

func (b *coreBackend) Cond(ctx context.Context, name string) (Cond, error) {
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	d, err := b.d.OpenCond(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("baton: %s: open cond %q: %w", b.d.Kind(), name, err)
	}
	c := &condHandle{b: b, name: name, d: d}
	if err := b.register(c, c.Close); err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes every handle the backend opened (releasing their holds), then
// the driver. Later calls return ErrClosed.
func (b *coreBackend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	handles := make([]func() error, 0, len(b.handles))
	for _, c := range b.handles {
		handles = append(handles, c)
	}
	b.handles = map[any]func() error{}
	b.mu.Unlock()
	var errs []error
	for _, c := range handles {
		if err := c(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := b.d.Close(); err != nil {
		errs = append(errs, err)
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
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return b.in.List(ctx)
}

func (b *inspectingBackend) Inspect(ctx context.Context, kind Kind, name string) (Info, error) {
	if err := b.validate(ctx, name); err != nil {
		return Info{}, err
	}
	return b.in.Inspect(ctx, kind, name)
}

func (b *inspectingBackend) Remove(ctx context.Context, kind Kind, name string) error {
	if err := b.validate(ctx, name); err != nil {
		return err
	}
	return b.in.Remove(ctx, kind, name)
}

var (
	_ Backend   = (*coreBackend)(nil)
	_ Inspector = (*inspectingBackend)(nil)
)
