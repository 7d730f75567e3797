package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster"
	"github.com/batonlock/baton/driver"
)

// semDriver serves one Semaphore handle. Every grant is a lease-bound entry
// of its own on the server, so Release may run concurrently with Acquire.
type semDriver struct {
	d        *backend
	name     string
	keys     []string
	capacity int64
	log      *slog.Logger // the backend's logger with the name
}

var _ driver.Semaphore = (*semDriver)(nil)

func (s *semDriver) Capacity() int64 { return s.capacity }
func (s *semDriver) Close() error    { return nil }

func (s *semDriver) mismatch() error {
	return fmt.Errorf("redislock: semaphore %q exists with another capacity than %d: %w", s.name, s.capacity, baton.ErrMismatch)
}

func (s *semDriver) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	id := newID()
	sent := time.Now()
	r, err := scriptSemAcquire.Run(ctx, s.d.c, s.keys, id, n, s.d.ttlMS(), s.d.meta, "", s.capacity).Int64()
	switch {
	case err != nil:
		return driver.Grant{}, fmt.Errorf("redislock: semaphore %q: %w", s.name, err)
	case r < 0:
		return driver.Grant{}, s.mismatch()
	case r == 0:
		return driver.Grant{}, fmt.Errorf("redislock: semaphore %q: %w", s.name, baton.ErrLocked)
	}
	return s.granted(id, n, sent), nil
}

func (s *semDriver) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: semaphore %q: %w", s.name, err)
	}
	if err := s.d.n.start(ctx); err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: semaphore %q: %w", s.name, err)
	}
	id := newID()
	wake := make(chan int64, 1)
	s.d.n.register(id, wake)
	defer s.d.n.unregister(id)
	args := []any{id, n, s.d.ttlMS(), s.d.meta, s.d.wake, s.capacity}
	sent := time.Now()
	r, err := scriptSemAcquire.Run(ctx, s.d.c, s.keys, args...).Int64()
	err = ctxErr(ctx, err)
	for {
		switch {
		case err != nil:
			s.cancel(ctx, id)
			return driver.Grant{}, fmt.Errorf("redislock: semaphore %q: %w", s.name, err)
		case r < 0:
			s.cancel(ctx, id)
			return driver.Grant{}, s.mismatch()
		case r == 1:
			return s.granted(id, n, sent), nil
		}
		t := time.NewTimer(s.d.o.lease.RenewEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			s.cancel(ctx, id)
			return driver.Grant{}, fmt.Errorf("redislock: semaphore %q: %w", s.name, ctx.Err())
		case <-wake:
			// Handed over by a release (see lockDriver.Acquire for why
			// sent bounds the lease).
			t.Stop()
			return s.granted(id, n, sent), nil
		case <-t.C:
		}
		sent = time.Now()
		r, err = scriptSemPoll.Run(ctx, s.d.c, s.keys, args...).Int64()
		err = ctxErr(ctx, err)
	}
}

func (s *semDriver) cancel(ctx context.Context, id string) {
	cctx, done := s.d.cleanupCtx(ctx)
	defer done()
	if err := scriptSemCancel.Run(cctx, s.d.c, s.keys, id, s.capacity).Err(); err != nil {
		s.d.o.log.Warn("redislock: withdrawing a waiter failed; its entry expires with the TTL",
			"name", s.name, "err", err)
	}
}

func (s *semDriver) granted(id string, n int64, sent time.Time) driver.Grant {
	loss := driver.NewLoss()
	h := &hold{id: id, loss: loss}
	h.keeper = cluster.StartKeeper(sent, s.d.o.lease, s.d.renewFunc(s.keys, id), loss, s.log)
	return driver.Grant{Loss: loss, N: n, Data: h}
}

func (s *semDriver) Release(ctx context.Context, g driver.Grant, n int64) error {
	h, err := holdOf(g)
	if err != nil {
		return err
	}
	if n < g.N {
		// Part of the grant stays held: keep renewing it.
		if e := h.loss.Err(); e != nil {
			return fmt.Errorf("redislock: semaphore %q: %w", s.name, e)
		}
		r, err := scriptSemRelease.Run(ctx, s.d.c, s.keys, h.id, n, s.capacity).Int64()
		if err != nil {
			return fmt.Errorf("redislock: semaphore %q: release: %w", s.name, err)
		}
		if r != 1 {
			h.loss.Fire(errors.New("the server no longer had the permits at release"))
			return fmt.Errorf("redislock: semaphore %q: %w", s.name, baton.ErrLost)
		}
		return nil
	}
	h.keeper.Stop()
	r, err := scriptSemRelease.Run(ctx, s.d.c, s.keys, h.id, n, s.capacity).Int64()
	return finish("semaphore", s.name, h, r, err)
}
