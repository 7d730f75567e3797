package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// The benchmarks compare baton's etcd Mutex with etcd's own
// concurrency.Mutex on the same embedded single-member server:
//
//	go test -run '^$' -bench . -benchtime 400x ./cluster/etcdlock
//
// Metrics: acq/s (acquisitions per second), handoff-p50-ms (holder's
// Unlock to the next waiter holding), overlaps (holds that overlapped:
// must be 0 for a lock), spread (fewest/most acquisitions per goroutine:
// 1 is perfectly fair).
func BenchmarkEtcd(b *testing.B) {
	c := startCluster(b, 1)
	cl := c.client(b)
	ctx := context.Background()
	be, err := New(cl, lease.WithPrefix("bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	seq := 0
	name := func() string { seq++; return fmt.Sprintf("b%d", seq) }
	session := func(b *testing.B) *concurrency.Session {
		s, err := concurrency.NewSession(cl, concurrency.WithTTL(10))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}

	// Uncontended Lock+Unlock, baton and concurrency.Mutex interleaved
	// pair by pair so that both see the same load on a shared machine.
	b.Run("Uncontended", func(b *testing.B) {
		m, err := be.Mutex(ctx, name())
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		cm := concurrency.NewMutex(session(b), "cm/"+name())
		var tb, tc []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := cm.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := cm.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
			tb, tc = append(tb, t1.Sub(t0)), append(tc, time.Since(t1))
		}
		slices.Sort(tb)
		slices.Sort(tc)
		pb, pc := tb[len(tb)/2], tc[len(tc)/2]
		b.ReportMetric(float64(pb.Microseconds())/1000, "baton-p50-ms")
		b.ReportMetric(float64(pc.Microseconds())/1000, "concurrency-p50-ms")
		b.ReportMetric(float64(pb)/float64(pc), "ratio")
	})

	// 16 goroutines, each with its own handle (baton) or its own session
	// (concurrency), take turns on one key.
	const workers = 16
	contended := func(b *testing.B, hold time.Duration, lock func(w int) (unlock func())) {
		var (
			inside, overlaps atomic.Int32
			counts           [workers]int
			left             atomic.Int64
			wg               sync.WaitGroup
		)
		left.Store(int64(b.N))
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					unlock := lock(w)
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					counts[w]++
					if hold > 0 {
						time.Sleep(hold)
					}
					inside.Add(-1)
					unlock()
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
		b.ReportMetric(float64(overlaps.Load()), "overlaps")
		b.ReportMetric(float64(slices.Min(counts[:]))/float64(max(1, slices.Max(counts[:]))), "spread")
	}
	b.Run("Contended16/baton", func(b *testing.B) {
		n := name()
		var ms [workers]baton.Mutex
		for i := range ms {
			m, err := be.Mutex(ctx, n)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			ms[i] = m
		}
		contended(b, 0, func(w int) func() {
			if _, err := ms[w].Lock(ctx); err != nil {
				b.Error(err)
			}
			return func() {
				if err := ms[w].Unlock(ctx); err != nil {
					b.Error(err)
				}
			}
		})
	})
	b.Run("Contended16/concurrency", func(b *testing.B) {
		n := "cm/" + name()
		var ms [workers]*concurrency.Mutex
		for i := range ms {
			ms[i] = concurrency.NewMutex(session(b), n)
		}
		contended(b, 0, func(w int) func() {
			if err := ms[w].Lock(ctx); err != nil {
				b.Error(err)
			}
			return func() {
				if err := ms[w].Unlock(ctx); err != nil {
					b.Error(err)
				}
			}
		})
	})
	// 16 goroutines sharing one session: baton's handles of one Backend
	// share its lease, and still exclude each other; concurrency.Mutex
	// values on one session share one key, and all "hold" at once.
	b.Run("SharedSession16/baton", func(b *testing.B) {
		n := name()
		var ms [workers]baton.Mutex
		for i := range ms {
			m, err := be.Mutex(ctx, n)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			ms[i] = m
		}
		contended(b, 100*time.Microsecond, func(w int) func() {
			if _, err := ms[w].Lock(ctx); err != nil {
				b.Error(err)
			}
			return func() { _ = ms[w].Unlock(ctx) }
		})
	})
	b.Run("SharedSession16/concurrency", func(b *testing.B) {
		n := "cm/" + name()
		s := session(b)
		var ms [workers]*concurrency.Mutex
		for i := range ms {
			ms[i] = concurrency.NewMutex(s, n)
		}
		contended(b, 100*time.Microsecond, func(w int) func() {
			if err := ms[w].Lock(ctx); err != nil {
				b.Error(err)
			}
			return func() { _ = ms[w].Unlock(ctx) }
		})
	})

	// Handoff: two goroutines alternate strictly; the time from one's
	// Unlock to the other's Lock returning is measured.
	handoff := func(b *testing.B, lock [2]func(), unlock [2]func()) {
		var lat []time.Duration
		lock[0]()
		for b.Loop() {
			got := make(chan time.Time)
			go func() {
				lock[1]()
				got <- time.Now()
			}()
			time.Sleep(2 * time.Millisecond) // let the waiter queue
			t0 := time.Now()
			unlock[0]()
			lat = append(lat, (<-got).Sub(t0))
			lock, unlock = [2]func(){lock[1], lock[0]}, [2]func(){unlock[1], unlock[0]}
		}
		unlock[0]()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "handoff-p50-ms")
		b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "handoff-p90-ms")
	}
	b.Run("Handoff/baton", func(b *testing.B) {
		n := name()
		var ms [2]baton.Mutex
		for i := range ms {
			m, err := be.Mutex(ctx, n)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			ms[i] = m
		}
		var lock, unlock [2]func()
		for i := range ms {
			m := ms[i]
			lock[i] = func() {
				if _, err := m.Lock(ctx); err != nil {
					b.Error(err)
				}
			}
			unlock[i] = func() {
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
				}
			}
		}
		handoff(b, lock, unlock)
	})
	b.Run("Handoff/concurrency", func(b *testing.B) {
		n := "cm/" + name()
		var lock, unlock [2]func()
		for i := range 2 {
			m := concurrency.NewMutex(session(b), n)
			lock[i] = func() {
				if err := m.Lock(ctx); err != nil {
					b.Error(err)
				}
			}
			unlock[i] = func() {
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
				}
			}
		}
		handoff(b, lock, unlock)
	})
}
