package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// MaxPermits is the largest semaphore capacity: each permit held is one
// advisory lock in the server's shared lock table.
const MaxPermits = 1024

// A semaphore of capacity C is C advisory locks, the slots (keys
// hashtextextended('semaphore/'||name, slot)), and a gate lock. An
// acquisition waits for the gate in the server's FIFO queue, then takes
// free slots with try-locks until it has as many as it asked for, keeping
// those it has while it waits for more, so that the head of the queue is
// served first whatever its size; then it gives the gate up. Releases
// announce themselves on the notification channel; the head also tries
// again at a backstop period, since a holder whose session dies frees its
// slots without a word.
const (
	semOpenSQL = `WITH i AS (INSERT INTO baton_semaphores (name, capacity) VALUES ($1, $2)
	ON CONFLICT (name) DO NOTHING RETURNING capacity)
SELECT capacity FROM i UNION ALL SELECT capacity FROM baton_semaphores WHERE name = $1`

	// $1 gate key, $2 idle timeout: the waiter's session ends if it goes
	// silent for a lease while it keeps the gate.
	semGateSQL = `SELECT pg_advisory_lock($1)::text, current_setting('idle_session_timeout'),
	set_config('idle_session_timeout', $2, false)`
	semTryGateSQL = `WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS ok, current_setting('idle_session_timeout') AS prev)
SELECT ok, prev, set_config('idle_session_timeout', CASE WHEN ok THEN $2 ELSE prev END, false) FROM l`

	// $1 slot prefix, $2 capacity, $3 slots held, $4 slots still wanted.
	semSlotsSQL = `SELECT coalesce(array_agg(s), '{}') FROM (SELECT s FROM generate_series(0, $2::int - 1) s
	WHERE CASE WHEN s = ANY($3::int[]) THEN false ELSE pg_try_advisory_lock(hashtextextended($1, s)) END
	LIMIT $4) x`

	// $1 kind, $2 name, $3 gate key.
	semGrantSQL = `WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($3))
INSERT INTO baton_tokens AS t (kind, name, n) SELECT $1, $2, 1 FROM u
ON CONFLICT (kind, name) DO UPDATE SET n = t.n + 1 RETURNING t.n`

	// $1 slot prefix, $2 slots, $3 payload, $4 idle timeout to set.
	semReleaseSQL = `WITH u AS MATERIALIZED (SELECT coalesce(bool_and(pg_advisory_unlock(hashtextextended($1, s))), false) AS ok
	FROM unnest($2::int[]) s),
x AS MATERIALIZED (SELECT pg_notify('` + channel + `', $3)::text, set_config('idle_session_timeout', $4, false) FROM u)
SELECT ok FROM u, x`
)

type semDriver struct {
	b        *backend
	name     string
	capacity int64
	gate     int64
	prefix   string
	payload  string
}

func (b *backend) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	if permits > MaxPermits {
		return nil, fmt.Errorf("%w: %d permits, at most %d on postgres", baton.ErrInvalidArgument, permits, MaxPermits)
	}
	if err := b.schema(ctx); err != nil {
		return nil, err
	}
	var c int64
	if err := b.pool.QueryRow(ctx, b.q(semOpenSQL), name, permits).Scan(&c); err != nil {
		return nil, err
	}
	if c != permits {
		return nil, fmt.Errorf("%w: capacity %d, asked for %d", baton.ErrMismatch, c, permits)
	}
	return &semDriver{b: b, name: name, capacity: permits, gate: b.key(baton.KindSemaphore, name),
		prefix: b.o.Prefix + "/semaphore/" + name, payload: "s/" + name}, nil
}

func (s *semDriver) Capacity() int64 { return s.capacity }
func (s *semDriver) Close() error    { return nil }

// backstop is how often the head of the queue tries again without a
// notification.
func (s *semDriver) backstop() time.Duration {
	return min(s.b.o.RenewEvery, 250*time.Millisecond)
}

func (s *semDriver) Acquire(ctx context.Context, n int64) (driver.Grant, error) {
	if err := s.b.lis.ensure(ctx); err != nil {
		return driver.Grant{}, err
	}
	wake := make(chan struct{}, 1)
	s.b.lis.subscribe(s.payload, wake)
	defer s.b.lis.unsubscribe(s.payload, wake)
	c, err := s.b.pool.Acquire(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	h := &hold{b: s.b, c: c, loss: driver.NewLoss()}
	var g, set string
	interrupted, err := waitRow(ctx, c, s.b.q(semGateSQL), []any{s.gate, s.b.idle}, &g, &h.prev, &set)
	switch {
	case interrupted:
		s.b.abandon(c, h.prev)
		return driver.Grant{}, ctx.Err()
	case err != nil:
		destroy(c)
		return driver.Grant{}, err
	}
	var slots []int32
	for {
		sent := time.Now()
		got, err := s.slots(c, slots, n)
		if err != nil {
			destroy(c)
			return driver.Grant{}, err
		}
		slots = append(slots, got...)
		if int64(len(slots)) == n {
			return s.grant(h, slots, sent)
		}
		t := time.NewTimer(s.backstop())
		select {
		case <-ctx.Done():
			t.Stop()
			s.b.abandon(c, h.prev)
			return driver.Grant{}, ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// slots tries to take n-len(held) more slots.
func (s *semDriver) slots(c *pgxpool.Conn, held []int32, n int64) ([]int32, error) {
	rctx, cancel := s.b.rctx()
	defer cancel()
	var got []int32
	err := c.QueryRow(rctx, s.b.q(semSlotsSQL), s.prefix, s.capacity, held, n-int64(len(held))).Scan(&got)
	return got, err
}

func (s *semDriver) grant(h *hold, slots []int32, sent time.Time) (driver.Grant, error) {
	rctx, cancel := s.b.rctx()
	defer cancel()
	var tok int64
	if err := h.c.QueryRow(rctx, s.b.q(semGrantSQL), string(baton.KindSemaphore), s.name, s.gate).Scan(&tok); err != nil {
		destroy(h.c)
		return driver.Grant{}, err
	}
	h.slots = slots
	if err := h.start(sent, s.name); err != nil {
		destroy(h.c)
		return driver.Grant{}, err
	}
	return driver.Grant{Token: uint64(tok), Loss: h.loss, N: int64(len(slots)), Data: h}, nil
}

func (s *semDriver) TryAcquire(ctx context.Context, n int64) (driver.Grant, error) {
	c, err := s.b.pool.Acquire(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	h := &hold{b: s.b, c: c, loss: driver.NewLoss()}
	rctx, cancel := s.b.rctx()
	defer cancel()
	var ok bool
	var set string
	sent := time.Now()
	if err := c.QueryRow(rctx, s.b.q(semTryGateSQL), s.gate, s.b.idle).Scan(&ok, &h.prev, &set); err != nil {
		destroy(c)
		return driver.Grant{}, err
	}
	if !ok {
		c.Release()
		return driver.Grant{}, baton.ErrLocked
	}
	slots, err := s.slots(c, nil, n)
	if err != nil {
		destroy(c)
		return driver.Grant{}, err
	}
	if int64(len(slots)) < n {
		s.b.abandon(c, h.prev)
		return driver.Grant{}, baton.ErrLocked
	}
	return s.grant(h, slots, sent)
}

func (s *semDriver) Release(ctx context.Context, g driver.Grant, n int64) error {
	h, err := driver.DataOf[hold](g)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if int64(len(h.slots)) == n {
		h.mu.Unlock()
		return h.end(semReleaseSQL, s.prefix, h.slots, s.payload, h.prev)
	}
	defer h.mu.Unlock()
	if err := h.loss.Err(); err != nil {
		return err
	}
	give := h.slots[len(h.slots)-int(n):]
	rctx, cancel := s.b.rctx()
	defer cancel()
	var held bool
	err = h.c.QueryRow(rctx, s.b.q(semReleaseSQL), s.prefix, give, s.payload, s.b.idle).Scan(&held)
	if err != nil || !held {
		h.loss.Fire(errors.New("the server no longer had the permits"))
		return h.loss.Err()
	}
	h.slots = h.slots[:len(h.slots)-int(n)]
	return nil
}
