package etcdlock

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// An acquisition whose write meets a lease that the server has dropped
// before the Backend noticed (revoked by another client, between two
// renewals) takes a new lease and succeeds: Lock and TryLock of a Mutex,
// Acquire and TryAcquire of a Semaphore.
func testUnnoticedLeaseGone(t *testing.T, c *cluster) {
	ctx := context.Background()
	o, err := buildOptions([]lease.Option{lease.WithTTL(10 * time.Second), lease.WithPrefix("leasegone")})
	if err != nil {
		t.Fatal(err)
	}
	d := newBackend(c.client(t), false, o)
	b := baton.NewBackend(d)
	t.Cleanup(func() { b.Close() })
	other := c.client(t)
	m := must(b.Mutex(ctx, "m")).get(t)
	s := must(b.Semaphore(ctx, "s", 2)).get(t)
	acquire := map[string]func() (func() error, error){
		"Lock": func() (func() error, error) {
			_, err := m.Lock(ctx)
			return func() error { return m.Unlock(ctx) }, err
		},
		"TryLock": func() (func() error, error) {
			_, err := m.TryLock(ctx)
			return func() error { return m.Unlock(ctx) }, err
		},
		"Acquire": func() (func() error, error) {
			_, err := s.Acquire(ctx, 1)
			return func() error { return s.Release(ctx, 1) }, err
		},
		"TryAcquire": func() (func() error, error) {
			_, err := s.TryAcquire(ctx, 1)
			return func() error { return s.Release(ctx, 1) }, err
		},
	}
	// A first acquisition opens the session.
	release := must(acquire["Lock"]()).get(t)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"Lock", "TryLock", "Acquire", "TryAcquire"} {
		old := leaseOf(t, d)
		if _, err := other.Revoke(ctx, old); err != nil {
			t.Fatal(err)
		}
		release, err := acquire[op]()
		if err != nil {
			t.Fatalf("%s after the lease was revoked: %v", op, err)
		}
		if now := leaseOf(t, d); now == old {
			t.Errorf("%s held on the revoked lease %x", op, int64(old))
		}
		if err := release(); err != nil {
			t.Errorf("release after %s: %v", op, err)
		}
	}
}
