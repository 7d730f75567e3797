package baton

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

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

	// The permit path (core_permits.go); pool is nil without one.
	pool     driver.PermitCounter
	poolLoss *driver.Loss
	pst      atomic.Int64
	fast     atomic.Int64

	mu sync.Mutex
	// All below guarded by mu.
	handleQueue                // with busy: an Acquire is in the driver
	grants      []driver.Grant // held grants, newest last
	held        int64          // permits held, the sum of grants[i].N
	releasing   sync.WaitGroup
}

// fail wraps the cause of a failed op in the handle's *Error.
func (s *semHandle) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	return s.b.failed(op, KindSemaphore, s.name, err)
}

func (s *semHandle) Acquire(ctx context.Context, n int64) (Hold, error) {
	if s.pool != nil && s.b.obs.Load() == nil {
		if hd, ok := s.takePermits(ctx, n); ok {
			return hd, nil
		}
	}
	return s.acquireOp("acquire", ctx, n, false)
}

func (s *semHandle) TryAcquire(ctx context.Context, n int64) (Hold, error) {
	if s.pool != nil && s.b.obs.Load() == nil {
		if hd, ok := s.takePermits(ctx, n); ok {
			return hd, nil
		}
	}
	return s.acquireOp("tryacquire", ctx, n, true)
}

// acquireOp is the rest of Acquire and TryAcquire, with its failure
// wrapped: observed, or through the handle's queue and the driver.
func (s *semHandle) acquireOp(op string, ctx context.Context, n int64, try bool) (Hold, error) {
	if r := s.b.obs.Load(); r != nil {
		return s.acquireObserved(r.o, op, ctx, n, try)
	}
	hd, err := s.acquire(ctx, n, try)
	if err != nil {
		return Hold{}, s.fail(op, err)
	}
	return hd, nil
}

func (s *semHandle) acquire(ctx context.Context, n int64, try bool) (Hold, error) {
	if ctx == nil {
		return Hold{}, errNilContext
	}
	if err := ValidatePermits(n, s.capacity); err != nil {
		return Hold{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Hold{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return Hold{}, err
	}
	if s.busy || !s.q.empty() {
		if try {
			s.mu.Unlock()
			return Hold{}, ErrLocked
		}
		w := newWaiter(Shared, 0, nil)
		s.q.push(w)
		s.syncSlow()
		for s.busy || s.q.head != w || s.closed {
			if s.closed {
				s.q.leave(w)
				s.syncSlow()
				s.mu.Unlock()
				return Hold{}, ErrClosed
			}
			s.mu.Unlock()
			select {
			case <-w.ch:
				s.mu.Lock()
				if err := ctx.Err(); err != nil {
					s.q.leave(w)
					s.syncSlow()
					s.mu.Unlock()
					return Hold{}, err
				}
			case <-ctx.Done():
				s.mu.Lock()
				s.q.leave(w)
				s.syncSlow()
				s.mu.Unlock()
				return Hold{}, ctx.Err()
			}
		}
		s.q.pop()
	}
	s.busy = true
	s.syncSlow()
	g, err := s.callDriver(&s.mu, ctx, try, cheap(s.d),
		func(ctx context.Context) (driver.Grant, error) { return s.d.TryAcquire(ctx, n) },
		func(ctx context.Context) (driver.Grant, error) { return s.d.Acquire(ctx, n) })
	s.mu.Lock()
	s.busy, s.cancelAcq = false, nil
	s.syncSlow()
	s.idle.broadcast()
	s.q.kick()
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
			return Hold{}, ErrClosed
		case rerr != nil:
			return Hold{}, fmt.Errorf("%w (giving back the permits: %v)", ctx.Err(), rerr)
		}
		return Hold{}, ctx.Err()
	}
	if err != nil {
		return Hold{}, s.failed(&s.mu, err)
	}
	g.N = n
	s.grants = append(s.grants, g)
	s.held += n
	s.mu.Unlock()
	return newHold(Token(g.Token), Shared, g.Recovered, g.Loss), nil
}

// Release gives back n permits held by this handle, newest grants first.
func (s *semHandle) Release(ctx context.Context, n int64) error {
	if r := s.b.obs.Load(); r != nil {
		return s.releaseObserved(r.o, ctx, n)
	}
	if s.pool != nil && ctx != nil && n > 0 {
		if done, err := s.givePermits(n); done {
			return s.fail("release", err)
		}
	}
	return s.fail("release", s.release(ctx, n))
}

func (s *semHandle) release(ctx context.Context, n int64) error {
	if ctx == nil {
		return errNilContext
	}
	if n <= 0 {
		return fmt.Errorf("%w: release of %d permits", ErrInvalidArgument, n)
	}
	s.mu.Lock()
	var counted int64 // permits of the permit path, given back with the grants'
	if n > s.held && !s.closed {
		if counted = s.takeCounted(n - s.held); counted < n-s.held {
			s.fast.Add(counted)
			counted = 0
		}
	}
	if n > s.held+counted {
		closed := s.closed
		held := s.held + s.fast.Load()
		s.mu.Unlock()
		if closed {
			return ErrClosed
		}
		return fmt.Errorf("%w: release of %d permits, %d held", ErrNotHeld, n, held)
	}
	n -= counted
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
	if counted > 0 {
		firstErr = s.pool.GivePermits(counted)
	}
	for _, p := range parts {
		if err := s.d.Release(context.WithoutCancel(ctx), p.g, p.k); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func (s *semHandle) Capacity() int64 { return s.capacity }
func (s *semHandle) Name() string    { return s.name }
func (s *semHandle) Close() error    { return s.fail("close", s.close()) }

func (s *semHandle) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closeQueue()
	counted := s.closePermits()
	for s.busy { // the Acquire in progress was cancelled and returns promptly
		s.idle.wait(&s.mu)
	}
	grants := s.grants
	s.grants, s.held = nil, 0
	s.mu.Unlock()
	s.releasing.Wait()
	var err error
	if counted > 0 {
		err = s.pool.GivePermits(counted)
	}
	for _, g := range grants {
		if rerr := s.d.Release(context.Background(), g, g.N); rerr != nil && err == nil {
			err = rerr
		}
	}
	if cerr := s.d.Close(); cerr != nil && err == nil {
		err = cerr
	}
	s.b.forget(s)
	return err
}

var _ Semaphore = (*semHandle)(nil)
