package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// BenchmarkUncontended compares an uncontended Lock+Unlock of a Mutex with
// its floor, the raw pg_advisory_lock + pg_advisory_unlock on one
// connection (two round trips, no token, no lease).
func BenchmarkUncontended(b *testing.B) {
	url := need(b)
	ctx := context.Background()
	b.Run("raw", func(b *testing.B) {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		k := int64(42)
		for b.Loop() {
			if _, err := c.Exec(ctx, rawLock, k); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Exec(ctx, rawUnlock, k); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mutex", func(b *testing.B) {
		be, err := OpenURL(ctx, url, lease.WithTTL(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		m, err := be.Mutex(ctx, "bench-uncontended")
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		for b.Loop() {
			if _, err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHandoff measures a contended handoff: two handles of two
// Backends take turns, each Lock waiting in the server for the other's
// Unlock.
func BenchmarkHandoff(b *testing.B) {
	url := need(b)
	ctx := context.Background()
	var ms [2]baton.Mutex
	for i := range ms {
		be, err := OpenURL(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		if ms[i], err = be.Mutex(ctx, "bench-handoff"); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := ms[0].Lock(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			if _, err := ms[1].Lock(ctx); err != nil {
				done <- err
				return
			}
			if err := ms[1].Unlock(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 0; i < b.N; i++ {
		if err := ms[0].Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := ms[0].Lock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := ms[0].Unlock(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
