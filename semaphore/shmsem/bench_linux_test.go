//go:build linux

package shmsem

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
	"github.com/batonlock/baton/semaphore"
)

// rawSemop returns a function making one semop P and one V with SEM_UNDO,
// straight through the system call: the floor of the System V semaphore.
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

func med(x []float64) float64 { x = slices.Clone(x); slices.Sort(x); return x[len(x)/2] }

// BenchmarkUncontended alternates rounds of Acquire(1)+Release(1) by four
// subjects: a buffered channel of 4, this driver called directly, the baton
// core over it, and a raw semop pair; it reports ns per pair of each
// (median of the rounds) and the median ratios.
func BenchmarkUncontended(b *testing.B) {
	ns := newNS(b)
	s := open(b, ns, "u", 4)
	be := baton.NewBackend(shmDriver{ns})
	b.Cleanup(func() { be.Close() })
	ctx := context.Background()
	cs, err := be.Semaphore(ctx, "uc", 4)
	if err != nil {
		b.Fatal(err)
	}
	raw := rawSemop(b)
	ch := make(chan struct{}, 4)
	const round = 20000
	subjects := []struct {
		n int
		f func()
	}{
		{round, func() {
			for range round {
				ch <- struct{}{}
				<-ch
			}
		}},
		{round, func() {
			for range round {
				g, _ := s.Acquire(ctx, 1)
				s.Release(ctx, g, 1)
			}
		}},
		{round, func() {
			for range round {
				cs.Acquire(ctx, 1)
				cs.Release(ctx, 1)
			}
		}},
		{round / 20, func() {
			for range round / 20 {
				raw()
			}
		}},
	}
	per := make([][]float64, len(subjects))
	for b.Loop() {
		for i, x := range subjects {
			t0 := time.Now()
			x.f()
			per[i] = append(per[i], float64(time.Since(t0).Nanoseconds())/float64(x.n))
		}
	}
	ratio := func(i, j int) float64 {
		r := make([]float64, len(per[i]))
		for k := range r {
			r[k] = per[i][k] / per[j][k]
		}
		return med(r)
	}
	b.ReportMetric(med(per[0]), "ns-chan")
	b.ReportMetric(med(per[1]), "ns-driver")
	b.ReportMetric(med(per[2]), "ns-core")
	b.ReportMetric(med(per[3]), "ns-semop")
	b.ReportMetric(ratio(1, 0), "x-chan-driver")
	b.ReportMetric(ratio(2, 0), "x-chan-core")
	b.ReportMetric(ratio(3, 1), "x-driver-semop")
}

// BenchmarkProcs4Cap1 runs 4 processes taking and giving back the one
// permit of a semaphore for 300ms each round, on this package's semaphore
// and, alternately, on the System V one, with a raw semop pair loop in
// this process between them; it reports acquisitions per second of the 4
// together for each (medians), raw semop's rate, the ratio of this
// package's to raw semop, and the worst wait of any acquisition of each.
func BenchmarkProcs4Cap1(b *testing.B) {
	ns := newNS(b)
	open(b, ns, "p4", 1)
	sv, err := semaphore.Open(ns, "p4", 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sv.Close(); semaphore.Remove(ns, "p4") })
	raw := rawSemop(b)
	const ms = 300
	run := func(role string) (float64, int64) {
		var ps []*proc
		for range 4 {
			ps = append(ps, spawn(b, ns, "p4", role, 1, ms))
		}
		total, worst := 0, int64(0)
		for _, p := range ps {
			var n int
			var w int64
			line, _ := p.out.ReadString('\n')
			if _, err := fmt.Sscan(line, &n, &w); err != nil {
				b.Fatalf("helper: %q", line)
			}
			if os.Getenv("BATON_SHMSEM_WAITS") != "" {
				fmt.Fprintf(os.Stderr, "%s: %s", role, line)
			}
			total += n
			worst = max(worst, w)
			_ = p.cmd.Wait()
		}
		return float64(total) / (ms / 1000.0), worst
	}
	var rates, sysv, raws []float64
	var worst, worstSysv int64
	for b.Loop() {
		r, w := run("contend")
		rates, worst = append(rates, r), max(worst, w)
		r, w = run("contendsysv")
		sysv, worstSysv = append(sysv, r), max(worstSysv, w)
		t0 := time.Now()
		n := 0
		for ; time.Since(t0) < 50*time.Millisecond; n++ {
			raw()
		}
		raws = append(raws, float64(n)/time.Since(t0).Seconds())
	}
	b.ReportMetric(med(rates), "acq/s")
	b.ReportMetric(med(sysv), "sysv-acq/s")
	b.ReportMetric(med(raws), "semop/s")
	b.ReportMetric(med(rates)/med(raws), "x-semop")
	b.ReportMetric(float64(worst)/1e6, "ms-worst-wait")
	b.ReportMetric(float64(worstSysv)/1e6, "ms-worst-wait-sysv")
}

// BenchmarkKillToGrant measures the time from the SIGKILL of a process
// holding every permit to the return of a waiter's Acquire; it reports the
// median, the 99th percentile and the worst, in ms. Run it with
// -benchtime=100x or more for a meaningful p99.
func BenchmarkKillToGrant(b *testing.B) {
	ns := newNS(b)
	s := open(b, ns, "kill", 2)
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		h := spawn(b, ns, "kill", "hold", 2, 2)
		h.expect(b, "held")
		got := make(chan int64, 1)
		go func() {
			g, err := s.Acquire(ctx, 1)
			if err != nil {
				b.Error(err)
				got <- 0
				return
			}
			t := locktest.Mono()
			_ = s.Release(ctx, g, 1)
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
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "ms-p50")
	b.ReportMetric(q(0.99), "ms-p99")
	b.ReportMetric(q(1), "ms-max")
}
