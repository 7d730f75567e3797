package baton

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/batonlock/baton/driver"
)

// semHandle is the core of a Semaphore handle: FIFO among the goroutines of
// the handle (one Acquire in the driver at a time, so a large request is not
// overtaken by small ones), the permits the handle holds, and validation.
type semHandle struct {
	b        *coreBackend
	name     string
	capacity int64
	d        driver.Semaphore

	mu sync.Mutex
	// All below guarded by mu.
	closed    bool
	busy      bool       // an Acquire is in the driver
	idle      *sync.Cond // on mu: signalled when busy becomes false
	cancelAcq context.CancelFunc
	q         []*waiter
	grants    []driver.Grant // held grants, newest last
	held      int64          // permits held, the sum of grants[i].N
	releasing sync.WaitGroup
}

func (s *semHandle) errf(format string, args ...any) error {
	return fmt.Errorf("baton: semaphore %q: "+format, append([]any{s.name}, args...)...)
}

func (s *semHandle) kick() {
	if len(s.q) > 0 {
		select {
		case s.q[0].ch <- struct{}{}:
		default:
		}
	}
}

func (s *semHandle) check(ctx context.Context, n int64) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ValidatePermits(n, s.capacity); err != nil {
		return s.errf("%w", err)
	}
	return nil
}

func (s *semHandle) Acquire(ctx context.Context, n int64) (Hold, error) {
	return s.acquire(ctx, n, false)
}

func (s *semHandle) TryAcquire(ctx context.Context, n int64) (Hold, error) {
	return s.acquire(ctx, n, true)
}

func (s *semHandle) acquire(ctx context.Context, n int64, try bool) (Hold, error) {
	if err := s.check(ctx, n); err != nil {
		return Hold{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Hold{}, s.errf("%w", ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return Hold{}, s.errf("%w", err)
	}
	if s.busy || len(s.q) > 0 {
		if try {
			s.mu.Unlock()
			return Hold{}, s.errf("%w", ErrLocked)
		}
		w := &waiter{ch: make(chan struct{}, 1)}
		s.q = append(s.q, w)
		for s.busy || s.q[0] != w || s.closed {
			if s.closed {
				s.removeWaiter(w)
				s.mu.Unlock()
				return Hold{}, s.errf("%w", ErrClosed)
			}
			s.mu.Unlock()
			select {
			case <-w.ch:
				s.mu.Lock()
				if err := ctx.Err(); err != nil {
					s.removeWaiter(w)
					s.mu.Unlock()
					return Hold{}, s.errf("%w", err)
				}
			case <-ctx.Done():
				s.mu.Lock()
				s.removeWaiter(w)
				s.mu.Unlock()
				return Hold{}, s.errf("%w", ctx.Err())
			}
		}
		s.q = s.q[1:]
	}
	s.busy = true
	var (
		g   driver.Grant
		err error
	)
	g, err = s.callDriver(ctx, n, try)
	s.mu.Lock()
	s.busy, s.cancelAcq = false, nil
	s.idle.Broadcast()
	s.kick()
	if err == nil && (s.closed || ctx.Err() != nil) {
		// Closed meanwhile, or ctx ended before the grant reached the
		// caller: the context wins and the permits go back (Close waits
		// for this Release before it closes the driver).
		closed := s.closed
		s.releasing.Add(1)
		s.mu.Unlock()
		rerr := s.d.Release(context.WithoutCancel(ctx), g, n)
		s.releasing.Done()
		switch {
		case closed:
			return Hold{}, s.errf("%w", ErrClosed)
		case rerr != nil:
			return Hold{}, s.errf("%w (giving back the permits: %v)", ctx.Err(), rerr)
		}
		return Hold{}, s.errf("%w", ctx.Err())
	}
	if err != nil {
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return Hold{}, s.errf("%w", ErrClosed)
		}
		return Hold{}, err
	}
	g.N = n
	s.grants = append(s.grants, g)
	s.held += n
	s.mu.Unlock()
	return newHold(Token(g.Token), Shared, g.Recovered, g.Loss), nil
}

// callDriver runs the driver's acquisition. It is entered with s.mu held
// and returns with s.mu released. Drivers whose TryAcquire is cheap are tried
// first, so that an uncontended Acquire does not pay for a cancellable wait.
func (s *semHandle) callDriver(ctx context.Context, n int64, try bool) (driver.Grant, error) {
	tf, cheap := s.d.(driver.TryFirst)
	if try || cheap && tf.TryFirst() {
		s.mu.Unlock()
		g, err := s.d.TryAcquire(ctx, n)
		if try || !errors.Is(err, ErrLocked) {
			return g, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return driver.Grant{}, s.errf("%w", ErrClosed)
		}
	}
	// Close cancels the wait through cancelAcq.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.cancelAcq = cancel
	s.mu.Unlock()
	return s.d.Acquire(actx, n)
}

func (s *semHandle) removeWaiter(w *waiter) {
	for i, x := range s.q {
		if x == w {
			s.q = append(s.q[:i], s.q[i+1:]...)
			if i == 0 {
				s.kick()
			}
			return
		}
	}
}

// Release gives back n permits held by this handle, newest grants first.
func (s *semHandle) Release(ctx context.Context, n int64) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if n <= 0 {
		return s.errf("%w: release of %d permits", ErrInvalidArgument, n)
	}
	s.mu.Lock()
	if n > s.held {
		closed := s.closed
		held := s.held
		s.mu.Unlock()
		if closed {
			return s.errf("%w", ErrClosed)
		}
		return s.errf("release of %d permits, %d held: %w", n, held, ErrNotHeld)
	}
	type part struct {
		g driver.Grant
		k int64
	}
	var buf [1]part // the usual case: one grant, no allocation
	parts := buf[:0]
	for left := n; left > 0; {
		i := len(s.grants) - 1
		g := s.grants[i]
		if g.N <= left {
			parts = append(parts, part{g, g.N})
			s.grants = s.grants[:i]
			left -= g.N
			continue
		}
		parts = append(parts, part{g, left})
		s.grants[i].N -= left
		left = 0
	}
	s.held -= n
	s.releasing.Add(1)
	s.mu.Unlock()
	defer s.releasing.Done()
	var firstErr error
	for _, p := range parts {
		if err := s.d.Release(context.WithoutCancel(ctx), p.g, p.k); err != nil && firstErr == nil {
			firstErr = s.errf("release: %w", err)
		}
	}
	return firstErr
}

func (s *semHandle) Capacity() int64 { return s.capacity }
func (s *semHandle) Name() string    { return s.name }

func (s *semHandle) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.cancelAcq != nil {
		s.cancelAcq()
	}
	for _, w := range s.q {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	for s.busy { // the Acquire in progress was cancelled and returns promptly
		s.idle.Wait()
	}
	grants := s.grants
	s.grants, s.held = nil, 0
	s.mu.Unlock()
	s.releasing.Wait()
	var err error
	for _, g := range grants {
		if rerr := s.d.Release(context.Background(), g, g.N); rerr != nil && err == nil {
			err = s.errf("close: %w", rerr)
		}
	}
	if cerr := s.d.Close(); cerr != nil && err == nil {
		err = s.errf("close: %w", cerr)
	}
	s.b.forget(s)
	return err
}

var _ Semaphore = (*semHandle)(nil)
