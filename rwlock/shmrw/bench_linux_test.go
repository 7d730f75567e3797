//go:build linux

package shmrw

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
)

// rawSemop returns a function making one semop P and one V with SEM_UNDO,
// straight through the system call: the floor of the System V lock.
func rawSemop(b *testing.B) func() {
	set, _, err := ipc.CreateSemSet(1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { set.Remove() })
	if err := set.TryOp([]ipc.SemOp{{Op: 1}}); err != nil {
		b.Fatal(err)
	}
	type sembuf struct {
		num      uint16
		op, flag int16
	}
	p, v := sembuf{0, -1, 0x1000}, sembuf{0, 1, 0x1000}
	id := uintptr(set.ID())
	return func() {
		unix.Syscall6(unix.SYS_SEMTIMEDOP, id, uintptr(unsafe.Pointer(&p)), 1, 0, 0, 0)
		unix.Syscall6(unix.SYS_SEMTIMEDOP, id, uintptr(unsafe.Pointer(&v)), 1, 0, 0, 0)
	}
}

func coreRW(b *testing.B, ns *ipc.Namespace, name string) baton.RWMutex {
	be := baton.NewBackend(shmDriver{ns})
	b.Cleanup(func() { be.Close() })
	m, err := be.RWMutex(context.Background(), name)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkUncontendedRead alternates rounds of RLock+RUnlock by four
// subjects on an idle machine state: sync.RWMutex, this driver called
// directly, the baton core over it, and a raw semop pair; it reports the
// ns per pair of each (median of the rounds) and the median ratios.
func BenchmarkUncontendedRead(b *testing.B) {
	ns := newNS(b)
	l := open(b, ns, "u")
	m := coreRW(b, ns, "uc")
	raw := rawSemop(b)
	var rw sync.RWMutex
	ctx := context.Background()
	const round = 20000
	subjects := []func(){
		func() {
			for range round {
				rw.RLock()
				rw.RUnlock()
			}
		},
		func() {
			for range round {
				g, _ := l.Acquire(ctx, driver.Shared)
				l.Release(ctx, g)
			}
		},
		func() {
			for range round {
				m.RLock(ctx)
				m.RUnlock(ctx)
			}
		},
		func() {
			for range round / 20 {
				raw()
			}
		},
	}
	ns4 := make([][]float64, len(subjects))
	for b.Loop() {
		for i, f := range subjects {
			t0 := time.Now()
			f()
			n := round
			if i == 3 {
				n = round / 20
			}
			ns4[i] = append(ns4[i], float64(time.Since(t0).Nanoseconds())/float64(n))
		}
	}
	med := func(x []float64) float64 { x = slices.Clone(x); slices.Sort(x); return x[len(x)/2] }
	b.ReportMetric(med(ns4[0]), "ns-sync")
	b.ReportMetric(med(ns4[1]), "ns-driver")
	b.ReportMetric(med(ns4[2]), "ns-core")
	b.ReportMetric(med(ns4[3]), "ns-semop")
	ratio := func(i, j int) float64 {
		r := make([]float64, len(ns4[i]))
		for k := range r {
			r[k] = ns4[i][k] / ns4[j][k]
		}
		return med(r)
	}
	b.ReportMetric(ratio(1, 0), "x-sync-driver")
	b.ReportMetric(ratio(2, 0), "x-sync-core")
	b.ReportMetric(ratio(3, 1), "x-driver-semop")
}

// BenchmarkReadHeavy16 runs 16 goroutines, each on a handle of its own,
// taking the lock for reading 95% of the time and for writing 5%, for
// rounds of 100ms each alternating with the same load on a sync.RWMutex
// and with one goroutine making raw semop pairs (the floor the issue
// compares with); it reports acquisitions per second (medians).
func BenchmarkReadHeavy16(b *testing.B) {
	ns := newNS(b)
	var drivers [16]*RW
	for i := range drivers {
		drivers[i] = open(b, ns, "h")
	}
	be := baton.NewBackend(shmDriver{ns})
	b.Cleanup(func() { be.Close() })
	var handles [16]baton.RWMutex
	for i := range handles {
		m, err := be.RWMutex(context.Background(), "hc")
		if err != nil {
			b.Fatal(err)
		}
		handles[i] = m
	}
	raw := rawSemop(b)
	ctx := context.Background()
	const d = 100 * time.Millisecond
	run := func(op func(g int, write bool)) float64 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		stop := time.Now().Add(d)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := 0
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for ; n%64 != 0 || time.Now().Before(stop); n++ {
					op(g, r.IntN(20) == 0)
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		return float64(total) / d.Seconds()
	}
	var rw sync.RWMutex
	var rates [4][]float64
	for b.Loop() {
		rates[0] = append(rates[0], run(func(g int, w bool) {
			if w {
				rw.Lock()
				rw.Unlock()
			} else {
				rw.RLock()
				rw.RUnlock()
			}
		}))
		rates[1] = append(rates[1], run(func(g int, w bool) {
			mode := driver.Shared
			if w {
				mode = driver.Exclusive
			}
			gr, _ := drivers[g].Acquire(ctx, mode)
			drivers[g].Release(ctx, gr)
		}))
		rates[2] = append(rates[2], run(func(g int, w bool) {
			if w {
				handles[g].Lock(ctx)
				handles[g].Unlock(ctx)
			} else {
				handles[g].RLock(ctx)
				handles[g].RUnlock(ctx)
			}
		}))
		t0 := time.Now()
		n := 0
		for ; time.Since(t0) < d/4; n++ {
			raw()
		}
		rates[3] = append(rates[3], float64(n)/time.Since(t0).Seconds())
	}
	med := func(x []float64) float64 { x = slices.Clone(x); slices.Sort(x); return x[len(x)/2] }
	b.ReportMetric(med(rates[0]), "sync/s")
	b.ReportMetric(med(rates[1]), "driver/s")
	b.ReportMetric(med(rates[2]), "core/s")
	b.ReportMetric(med(rates[3]), "semop/s")
	b.ReportMetric(med(rates[2])/med(rates[3]), "x-core-semop")
}

// BenchmarkKillToGrant measures the time from the SIGKILL of a process
// that holds the lock (the write lock, or a read lock, alternately) to the
// return of a waiting writer's Acquire; it reports the median, the 99th
// percentile and the worst, in ms. Run it with -benchtime=100x or more for
// a meaningful p99.
func BenchmarkKillToGrant(b *testing.B) {
	ns := newNS(b)
	l := open(b, ns, "kill")
	ctx := context.Background()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		role := "write"
		if i++; i%2 == 0 {
			role = "read"
		}
		h := spawn(b, ns, "kill", role)
		h.expect(b, "held")
		got := make(chan int64, 1)
		go func() {
			g, err := l.Acquire(ctx, driver.Exclusive)
			if err != nil {
				b.Error(err)
				got <- 0
				return
			}
			t := locktest.Mono()
			_ = l.Release(ctx, g)
			got <- t
		}()
		time.Sleep(5 * time.Millisecond) // into the wait
		b.StartTimer()
		t0 := locktest.Mono()
		_ = h.cmd.Process.Kill()
		t1 := <-got
		b.StopTimer()
		_ = h.cmd.Wait()
		lat = append(lat, time.Duration(t1-t0))
		b.StartTimer()
	}
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "ms-p50")
	b.ReportMetric(q(0.99), "ms-p99")
	b.ReportMetric(q(1), "ms-max")
}
