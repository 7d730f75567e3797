package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// uncontended sets up the two sides of BenchmarkUncontended: one cycle of
// the raw floor, pg_advisory_lock + pg_advisory_unlock on one connection
// (two round trips, no token, no lease), and one uncontended Lock+Unlock
// of a Mutex.
func uncontended(b *testing.B) (raw, mutex func()) {
	url := need(b)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(ctx) })
	be, err := OpenURL(ctx, url, lease.WithTTL(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	m, err := be.Mutex(ctx, "bench-uncontended")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	k := int64(42)
	raw = func() {
		if _, err := c.Exec(ctx, rawLock, k); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Exec(ctx, rawUnlock, k); err != nil {
			b.Fatal(err)
		}
	}
	mutex = func() {
		if _, err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return raw, mutex
}

// BenchmarkUncontended compares an uncontended Lock+Unlock of a Mutex with
// its floor. The ratio sub-benchmark alternates the two in one loop, so
// that both see the same load on the machine, and reports the Mutex's
// time over the floor's.
func BenchmarkUncontended(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		raw, _ := uncontended(b)
		for b.Loop() {
			raw()
		}
	})
	b.Run("mutex", func(b *testing.B) {
		_, mutex := uncontended(b)
		for b.Loop() {
			mutex()
		}
	})
	b.Run("ratio", func(b *testing.B) {
		raw, mutex := uncontended(b)
		var floor, baton time.Duration
		for b.Loop() {
			t0 := time.Now()
			raw()
			t1 := time.Now()
			mutex()
			floor, baton = floor+t1.Sub(t0), baton+time.Since(t1)
		}
		b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "floor-ns/op")
		b.ReportMetric(float64(baton.Nanoseconds())/float64(b.N), "mutex-ns/op")
		b.ReportMetric(float64(baton)/float64(floor), "ratio")
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
