package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// The benchmarks compare baton's etcd Mutex with etcd's own
// concurrency.Mutex on the same embedded single-member server:
//
//	go test -run '^$' -bench . ./cluster/etcdlock
//
// Metrics: acq/s (acquisitions per second), handoff-p50-ms (holder's
// Unlock to the next waiter holding), overlaps (holds that overlapped:
// must be 0 for a lock), spread (fewest/most acquisitions per goroutine:
// 1 is perfectly fair).

// benchEnv is a server, a client and a baton Backend for one benchmark.
type benchEnv struct {
	cl  *clientv3.Client
	be  baton.Backend
	seq int
}

func newBenchEnv(b *testing.B) *benchEnv {
	c := startCluster(b, 1)
	cl := c.client(b)
	be, err := New(cl, lease.WithPrefix("bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return &benchEnv{cl: cl, be: be}
}

func (e *benchEnv) name() string { e.seq++; return fmt.Sprintf("b%d", e.seq) }

func (e *benchEnv) session(b *testing.B) *concurrency.Session {
	s, err := concurrency.NewSession(e.cl, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// mutexes opens n baton handles of one new name.
func (e *benchEnv) mutexes(b *testing.B, n int) []baton.Mutex {
	name := e.name()
	ms := make([]baton.Mutex, n)
	for i := range ms {
		m, err := e.be.Mutex(context.Background(), name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
		ms[i] = m
	}
	return ms
}

const workers = 16

// contended runs workers goroutines taking turns on one lock, b.N
// acquisitions in all.
func contended(b *testing.B, hold time.Duration, lock func(w int) (unlock func())) {
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

// Uncontended Lock+Unlock, baton and concurrency.Mutex interleaved pair by
// pair so that both see the same load on a shared machine.
func BenchmarkUncontended(b *testing.B) { uncontendedPairs(b, context.Background()) }

// The same with a context that can be cancelled, as a caller's usually can.
func BenchmarkUncontendedCancel(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	uncontendedPairs(b, ctx)
}

func uncontendedPairs(b *testing.B, ctx context.Context) {
	e := newBenchEnv(b)
	m := e.mutexes(b, 1)[0]
	cm := concurrency.NewMutex(e.session(b), "cm/"+e.name())
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
}

// 16 goroutines, each with its own handle of one Backend (baton) or its own
// session (concurrency), take turns on one key. baton's handles of one
// Backend pass the hold among themselves.
func BenchmarkContended16(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	b.Run("baton", func(b *testing.B) {
		ms := e.mutexes(b, workers)
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
	b.Run("concurrency", func(b *testing.B) {
		n := "cm/" + e.name()
		var ms [workers]*concurrency.Mutex
		for i := range ms {
			ms[i] = concurrency.NewMutex(e.session(b), n)
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
}

// 16 goroutines sharing one session: baton's handles of one Backend share
// its lease, and still exclude each other; concurrency.Mutex values on one
// session share one key, and all "hold" at once.
func BenchmarkSharedSession16(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	b.Run("baton", func(b *testing.B) {
		ms := e.mutexes(b, workers)
		contended(b, 100*time.Microsecond, func(w int) func() {
			if _, err := ms[w].Lock(ctx); err != nil {
				b.Error(err)
			}
			return func() { _ = ms[w].Unlock(ctx) }
		})
	})
	b.Run("concurrency", func(b *testing.B) {
		n := "cm/" + e.name()
		s := e.session(b)
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
}

// Handoff: two goroutines alternate strictly; the time from one's Unlock
// to the other's Lock returning is measured. baton's two handles are of one
// Backend (the hold is passed) and of two Backends (it goes through etcd).
func BenchmarkHandoff(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	batonPair := func(b *testing.B, ms []baton.Mutex) {
		var lock, unlock [2]func()
		for i := range 2 {
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
	}
	b.Run("baton", func(b *testing.B) { batonPair(b, e.mutexes(b, 2)) })
	b.Run("baton-two-backends", func(b *testing.B) {
		other, err := New(e.cl, lease.WithPrefix("bench"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { other.Close() })
		ms := e.mutexes(b, 1)
		m, err := other.Mutex(ctx, ms[0].Name())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
		batonPair(b, append(ms, m))
	})
	b.Run("concurrency", func(b *testing.B) {
		n := "cm/" + e.name()
		var lock, unlock [2]func()
		for i := range 2 {
			m := concurrency.NewMutex(e.session(b), n)
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

func handoff(b *testing.B, lock [2]func(), unlock [2]func()) {
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

// Uncontended Lock+Unlock of each side alone, so that -benchmem and the
// profiles count one side only; with a context that has no end, and with
// one that can be cancelled (as a caller's usually can).
func BenchmarkUncontendedSide(b *testing.B) {
	e := newBenchEnv(b)
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"", context.Background()}, {"-cancel", cctx}} {
		ctx := c.ctx
		b.Run("baton"+c.name, func(b *testing.B) {
			m := e.mutexes(b, 1)[0]
			for b.Loop() {
				if _, err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("concurrency"+c.name, func(b *testing.B) {
			cm := concurrency.NewMutex(e.session(b), "cm/"+e.name())
			for b.Loop() {
				if err := cm.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := cm.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
