//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// rawRedlock is the floor of a Redlock over several nodes: rawRedis's
// commands sent to every node at once, done when a majority agreed; the
// slower nodes finish in the background.
//
// Each acquisition writes a value of its own, as baton's and redsync's
// Redlocks do: a straggling release of an earlier acquisition can then
// never delete a later one, and a SET that lands after its acquisition was
// given back is given back by the goroutine that sent it, after its reply,
// so on that node the two cannot pass each other. Refusals and node errors
// are retried after the poll delay, as the peers' retry loops do; only a
// majority of nodes failing for errRetryFor ends Lock with the error.
type rawRedlock struct {
	cs   []*redis.Client
	key  string
	poll time.Duration
	cur  *rlAcq // the acquisition held; one goroutine uses a handle
}

// rlAcq is one acquisition attempt.
type rlAcq struct {
	val      string
	released atomic.Bool // set before the release is sent
}

const (
	rlNodeTimeout = time.Second
	errRetryFor   = 5 * time.Second
)

type nodeAnswer struct {
	ok  bool
	err error
}

// fan runs f on every node in parallel, each bounded by rlNodeTimeout, and
// returns the channel of their answers; answers not read finish in the
// background.
func (r *rawRedlock) fan(ctx context.Context, f func(ctx context.Context, c *redis.Client) (bool, error)) <-chan nodeAnswer {
	out := make(chan nodeAnswer, len(r.cs))
	base := context.WithoutCancel(ctx)
	for _, c := range r.cs {
		go func() {
			nctx, cancel := context.WithTimeout(base, rlNodeTimeout)
			defer cancel()
			ok, err := f(nctx, c)
			out <- nodeAnswer{ok, err}
		}()
	}
	return out
}

func (r *rawRedlock) quorum() int { return len(r.cs)/2 + 1 }

// attempt tries once; it returns whether a majority granted and, when a
// majority could not answer, the last node error.
func (r *rawRedlock) attempt(ctx context.Context, a *rlAcq) (bool, error) {
	answers := r.fan(ctx, func(ctx context.Context, c *redis.Client) (bool, error) {
		ok, err := c.SetNX(ctx, r.key, a.val, lockTTL).Result()
		if ok && a.released.Load() {
			_ = casDelete.Run(ctx, c, []string{r.key}, a.val).Err()
		}
		return ok, err
	})
	yes, no, errs := 0, 0, 0
	var last error
	for range r.cs {
		ans := <-answers
		switch {
		case ans.err != nil:
			errs++
			last = ans.err
		case ans.ok:
			yes++
		default:
			no++
		}
		if yes >= r.quorum() {
			return true, nil
		}
		if no+errs > len(r.cs)-r.quorum() {
			break
		}
	}
	if errs > len(r.cs)-r.quorum() {
		return false, last
	}
	return false, nil
}

// release gives a back on every node and returns once a majority answered;
// the error says that no majority could.
func (r *rawRedlock) release(ctx context.Context, a *rlAcq) error {
	a.released.Store(true)
	answers := r.fan(ctx, func(ctx context.Context, c *redis.Client) (bool, error) {
		n, err := casDelete.Run(ctx, c, []string{r.key}, a.val).Int()
		return n == 1, err
	})
	answered, errs := 0, 0
	var last error
	for range r.cs {
		ans := <-answers
		if ans.err != nil {
			errs++
			last = ans.err
		} else {
			answered++
		}
		if answered >= r.quorum() {
			return nil
		}
		if errs > len(r.cs)-r.quorum() {
			break
		}
	}
	return fmt.Errorf("raw redlock: release reached no majority: %w", last)
}

func (r *rawRedlock) lock(ctx context.Context) error {
	if r.cur != nil {
		return errors.New("raw redlock: already held by this handle")
	}
	var failingSince time.Time
	for {
		a := &rlAcq{val: randToken()}
		ok, err := r.attempt(ctx, a)
		if ok {
			r.cur = a
			return nil
		}
		if rerr := r.release(ctx, a); err == nil {
			err = rerr
		}
		switch {
		case err == nil:
			failingSince = time.Time{}
		case failingSince.IsZero():
			failingSince = time.Now()
		case time.Since(failingSince) > errRetryFor:
			return fmt.Errorf("raw redlock: no majority for %s: %w", errRetryFor, err)
		}
		select {
		case <-time.After(r.poll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *rawRedlock) unlock(ctx context.Context) error {
	a := r.cur
	if a == nil {
		return errors.New("raw redlock: not held")
	}
	r.cur = nil
	return r.release(ctx, a)
}

func (r *rawRedlock) close() error { return nil }
