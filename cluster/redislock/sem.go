package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// semDriver serves one Semaphore handle. Every grant is a lease-bound entry
// of its own on the server, so Release may run concurrently with Acquire.
type semDriver struct {
	d        *backend
	name     string
	keys     keySet
	capacity int64
}

var _ driver.Semaphore = (*semDriver)(nil)

// semNotReady is the reply of sem_acquire.lua and sem_poll.lua when the
// marker is missing (restart.go).
const semNotReady = -2

// marker returns the key of the marker (restart.go), the last of s.keys.
func (s *semDriver) marker() string { return s.keys.marker }

func (s *semDriver) Capacity() int64 { return s.capacity }
func (s *semDriver) Close() error    { return nil }

func (s *semDriver) mismatch() error {
	return fmt.Errorf("it exists with another capacity than %d: %w", s.capacity, baton.ErrMismatch)
}

func (s *semDriver) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	for {
		id := redisnode.NewID()
		sent := time.Now()
		v, acked, err := s.d.run(ctx, scriptSemAcquire, s.keys.all(), id, n, s.d.ttlMS(), s.d.meta, "", s.capacity)
		r, _ := v.(int64)
		if err == nil && r == 1 && !acked {
			s.cancel(ctx, id)
			return driver.Grant{}, s.d.notReplicated()
		}
		if err == nil && r == semNotReady {
			if err = s.d.notReady(ctx, s.marker()); err == nil {
				continue
			}
		}
		switch {
		case err != nil:
			return driver.Grant{}, err
		case r < 0:
			return driver.Grant{}, s.mismatch()
		case r == 0:
			return driver.Grant{}, baton.ErrLocked
		}
		// A reply too late to bound the lease: renew before trusting it.
		renew := s.d.renewFunc(scriptRenew, s.keys.all(), id)
		for err == nil && !s.d.fresh(sent) {
			sent, err = renew(ctx)
		}
		if err == nil {
			return s.granted(id, n, sent), nil
		}
		if !errors.Is(err, baton.ErrLost) {
			s.cancel(ctx, id)
			return driver.Grant{}, err
		}
	}
}

func (s *semDriver) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	if err := s.d.n.start(ctx); err != nil {
		return driver.Grant{}, err
	}
	id := redisnode.NewID()
	wake := make(chan int64, 1)
	s.d.n.register(id, wake)
	defer s.d.n.unregister(id)
	args := []any{id, n, s.d.ttlMS(), s.d.meta, s.d.wake, s.capacity}
	keys := s.keys.all()
	sent := time.Now()
	v, acked, err := s.d.run(ctx, scriptSemAcquire, keys, args...)
	r, _ := v.(int64)
	err = ctxErr(ctx, err)
	for {
		if err == nil && r == 1 && !acked {
			s.cancel(ctx, id)
			return driver.Grant{}, s.d.notReplicated()
		}
		if err == nil && r == semNotReady {
			// Nothing was changed on the server; poll once it is ready.
			if err = s.d.awaitReady(ctx, s.marker()); err == nil {
				sent = time.Now()
				v, acked, err = s.d.run(ctx, scriptSemPoll, keys, args...)
				r, _ = v.(int64)
				err = ctxErr(ctx, err)
				continue
			}
		}
		switch {
		case err != nil:
			s.cancel(ctx, id)
			return driver.Grant{}, err
		case r < 0:
			s.cancel(ctx, id)
			return driver.Grant{}, s.mismatch()
		case r == 1 && s.d.fresh(sent):
			return s.granted(id, n, sent), nil
		case r == 1:
			// Held on a reply too late to bound the lease: poll at once
			// (see queued.Acquire in lock.go).
		default:
			_, handed, err := s.d.awaitHandoff(ctx, wake, sent)
			if err != nil {
				s.cancel(ctx, id)
				return driver.Grant{}, err
			}
			if handed {
				return s.granted(id, n, sent), nil
			}
		}
		sent = time.Now()
		v, acked, err = s.d.run(ctx, scriptSemPoll, keys, args...)
		r, _ = v.(int64)
		err = ctxErr(ctx, err)
	}
}

func (s *semDriver) cancel(ctx context.Context, id string) {
	cctx, done := s.d.cleanupCtx(ctx)
	defer done()
	if err := scriptSemCancel.Run(cctx, s.d.c, s.keys.all(), id, s.capacity).Err(); err != nil {
		s.d.o.Logger.Warn("redislock: withdrawing a waiter failed; its entry expires with the TTL",
			"name", s.name, "err", err)
	}
}

func (s *semDriver) granted(id string, n int64, sent time.Time) driver.Grant {
	loss := driver.NewLoss()
	h := &hold{id: id, loss: loss}
	h.keeper = lease.StartKeeper(sent, &s.d.o.Config, s.d.renewFunc(scriptRenew, s.keys.all(), id), loss, s.name)
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
			return e
		}
		r, err := scriptSemRelease.Run(ctx, s.d.c, s.keys.all(), h.id, n, s.capacity).Int64()
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if r != 1 {
			h.loss.Fire(errors.New("the server no longer had the permits at release"))
			return baton.ErrLost
		}
		return nil
	}
	h.keeper.Stop()
	r, err := scriptSemRelease.Run(ctx, s.d.c, s.keys.all(), h.id, n, s.capacity).Int64()
	return finish(h, r, err)
}
