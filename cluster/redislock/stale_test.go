package redislock

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

// pause stops the server now and resumes it after d; the channel closes on
// resumption.
func pause(t *testing.T, s *server, d time.Duration) <-chan struct{} {
	s.Signal(syscall.SIGSTOP)
	resumed := make(chan struct{})
	tm := time.AfterFunc(d, func() { s.Signal(syscall.SIGCONT); close(resumed) })
	t.Cleanup(func() {
		if tm.Stop() {
			s.Signal(syscall.SIGCONT)
		}
	})
	return resumed
}

// locker is one primitive as a waiter test uses it.
type locker struct {
	lock   func(ctx context.Context) (baton.Hold, error)
	try    func(ctx context.Context) (baton.Hold, error)
	unlock func(ctx context.Context) error
}

func lockerOf(t *testing.T, b baton.Backend, kind, name string) locker {
	ctx := context.Background()
	switch kind {
	case "rwmutex":
		m := rwmutex(t, b, name)
		return locker{m.Lock, m.TryLock, m.Unlock}
	case "semaphore":
		m, err := b.Semaphore(ctx, name, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return locker{
			func(ctx context.Context) (baton.Hold, error) { return m.Acquire(ctx, 1) },
			func(ctx context.Context) (baton.Hold, error) { return m.TryAcquire(ctx, 1) },
			func(ctx context.Context) error { return m.Release(ctx, 1) },
		}
	}
	m := mutex(t, b, name)
	return locker{m.Lock, m.TryLock, m.Unlock}
}

// A waiter queued on the server while the server is paused past the TTL:
// the holder's Loss fires, and the waiter, granted by the first reply after
// the pause (to a request sent before it), must not be handed a lease that
// already ran out.
func TestPausedServerWaiterHoldLive(t *testing.T) {
	for _, kind := range []string{"mutex", "rwmutex", "semaphore"} {
		t.Run(kind, func(t *testing.T) { pausedWaiter(t, kind) })
	}
}

func pausedWaiter(t *testing.T, kind string) {
	s := startRedis(t)
	a := lockerOf(t, open(t, s.URL("ttl=1s")), kind, "paused-waiter")
	b := lockerOf(t, open(t, s.URL("ttl=1s")), kind, "paused-waiter")
	ha, err := a.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		h   baton.Hold
		err error
	}
	got := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		h, err := b.lock(ctx)
		got <- res{h, err}
	}()
	c := s.Client()
	queue := map[string]string{"mutex": mutexKeys(DefaultPrefix, "paused-waiter")[3],
		"rwmutex": lockKeys(DefaultPrefix, krw, "paused-waiter")[2], "semaphore": semKeys(DefaultPrefix, "paused-waiter")[2]}[kind]
	eventually(t, func() error {
		if c.ZCard(context.Background(), queue).Val() != 1 {
			return errNotQueued
		}
		return nil
	})
	resumed := pause(t, s, 2*time.Second)
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	select {
	case <-ha.Lost():
	default:
		t.Fatal("the waiter holds while the first holder's Loss has not fired")
	}
	if kind != "semaphore" && r.h.Token() <= ha.Token() {
		t.Fatalf("waiter's token %d <= first holder's %d", r.h.Token(), ha.Token())
	}
	if err := r.h.Err(); err != nil {
		t.Fatalf("Lock returned a hold already lost: %v", err)
	}
	<-resumed
	time.Sleep(300 * time.Millisecond)
	if err := r.h.Err(); err != nil {
		t.Fatalf("the hold Lock returned was lost after the pause: %v", err)
	}
	if err := b.unlock(context.Background()); err != nil {
		t.Fatalf("Unlock of the hold Lock returned: %v", err)
	}
	if err := a.unlock(context.Background()); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Unlock of the lost hold: %v, want ErrLost", err)
	}
}

// A hold whose lease is older than a renewal period (the server is paused,
// renewals are late) is not passed to another handle: the receiver would get
// a lease about to run out, however recently it was taken on the server.
func TestPausedServerNoStalePass(t *testing.T) {
	s := startRedis(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	d, err := newDriver(c, []lease.Option{lease.WithTTL(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	a, _ := d.OpenMutex(ctx, "paused-pass")
	ga, err := a.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := a.(driver.Passer).Pass(ga); !ok {
		t.Fatal("Pass of a fresh hold refused")
	} else {
		ga = g
	}
	resumed := pause(t, s, 2500*time.Millisecond)
	h := ga.Data.(*hold)
	for time.Until(h.keeper.Deadline()) > d.o.TTL-d.o.Drift-d.o.RenewEvery {
		time.Sleep(5 * time.Millisecond)
	}
	if h.loss.Err() != nil {
		t.Fatal("the holder's lease ran out before the test could pass it")
	}
	if _, ok := a.(driver.Passer).Pass(ga); ok {
		t.Fatal("a hold whose lease is older than a renewal period was passed")
	}
	<-resumed
	// The holder's lease ran out on the server during the pause.
	if err := a.Release(ctx, ga); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Release of the holder: %v, want ErrLost", err)
	}
}
