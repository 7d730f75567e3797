//go:build linux

package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// jitter delays every command of a client by up to max before sending it,
// so that commands sent on different connections of its pool reach the
// server in another order than they were issued: what a slow or busy node
// does to the stragglers of a Redlock.
type jitter struct{ max time.Duration }

func (j jitter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (j jitter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(rand.N(j.max))
		return next(ctx, cmd)
	}
}
func (j jitter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

func startRedisOrSkip(t *testing.T, n int) []*redis.Client {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not on PATH")
		}
		t.Skip("redis-server not on PATH")
	}
	var cs []*redis.Client
	for range n {
		s, err := startRedis(context.Background(), pinning{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.stop)
		c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 16})
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// TestRawRedlockStragglers takes and gives back the raw Redlock floor
// hundreds of times while two of its three nodes answer late and out of
// order: every Lock and Unlock succeeds, as the peers' do, and no node is
// left holding the key.
func TestRawRedlockStragglers(t *testing.T) {
	cs := startRedisOrSkip(t, 3)
	for _, c := range cs[1:] {
		c.AddHook(jitter{5 * time.Millisecond})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &rawRedlock{cs: cs, key: "rawredlock:stragglers", poll: time.Millisecond}
	for i := range 600 {
		if err := r.lock(ctx); err != nil {
			t.Fatalf("cycle %d: lock: %v", i, err)
		}
		if err := r.unlock(ctx); err != nil {
			t.Fatalf("cycle %d: unlock: %v", i, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for i, c := range cs {
		for {
			n, err := c.Exists(ctx, r.key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d still holds the key after the last Unlock", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestRawRedlockNodeDown: with one node of three unreachable the floor still
// takes and gives back the lock (a majority answers); with two down, Lock
// retries and ends with the node error once its retry time is over, or
// with the context's.
func TestRawRedlockNodeDown(t *testing.T) {
	cs := startRedisOrSkip(t, 2)
	redis.SetLogger(quietLog{}) // the dead node's dial errors
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now
	down := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer down.Close()
	ctx := context.Background()
	r := &rawRedlock{cs: []*redis.Client{cs[0], down, cs[1]}, key: "rawredlock:down", poll: time.Millisecond}
	for i := range 20 {
		if err := r.lock(ctx); err != nil {
			t.Fatalf("cycle %d: lock with one node down: %v", i, err)
		}
		if err := r.unlock(ctx); err != nil {
			t.Fatalf("cycle %d: unlock with one node down: %v", i, err)
		}
	}
	r2 := &rawRedlock{cs: []*redis.Client{cs[0], down, down}, key: "rawredlock:down2", poll: time.Millisecond}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := r2.lock(cctx); err == nil {
		t.Fatal("lock with two of three nodes down succeeded")
	}
}

// failFirst makes the first n SET commands of a client fail before they
// are sent, as a dropped connection would.
type failFirst struct{ n *atomic.Int64 }

func (f failFirst) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f failFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "set" && f.n.Add(-1) >= 0 {
			err := errors.New("injected: connection reset")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (f failFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The floors retry a failed request, as redsync's retry loop does, instead
// of failing their row for the rest of the run.
func TestFloorsRetryFailedRequests(t *testing.T) {
	cs := startRedisOrSkip(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := new(atomic.Int64)
	n.Store(3)
	one := redis.NewClient(cs[0].Options())
	defer one.Close()
	one.AddHook(failFirst{n})
	rr := &rawRedis{c: one, key: "rawredis:retry", val: "v", poll: time.Millisecond}
	if err := rr.lock(ctx); err != nil {
		t.Fatalf("raw redis: %v", err)
	}
	if err := rr.unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Load() >= 0 {
		t.Fatal("the injected failures were not all hit")
	}

	// Two of three nodes failing their first SETs: no majority at first.
	var nodes []*redis.Client
	for i, c := range cs {
		cc := redis.NewClient(c.Options())
		defer cc.Close()
		if i > 0 {
			m := new(atomic.Int64)
			m.Store(2)
			cc.AddHook(failFirst{m})
		}
		nodes = append(nodes, cc)
	}
	rl := &rawRedlock{cs: nodes, key: "rawredlock:retry", poll: time.Millisecond}
	if err := rl.lock(ctx); err != nil {
		t.Fatalf("raw redlock: %v", err)
	}
	if err := rl.unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
