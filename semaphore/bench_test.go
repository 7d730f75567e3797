//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package semaphore

import (
	"context"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
)

// BenchmarkRawSemopPV is the floor: one semop P and one semop V with
// SEM_UNDO on a set made for the purpose, straight through the syscall.
func BenchmarkRawSemopPV(b *testing.B) {
	set, _, err := ipc.CreateSemSet(1)
	if err != nil {
		b.Fatal(err)
	}
	defer set.Remove()
	type sembuf struct {
		num      uint16
		op, flag int16
	}
	if err := set.TryOp([]ipc.SemOp{{Op: 1}}); err != nil {
		b.Fatal(err)
	}
	p := sembuf{0, -1, 0x1000}
	v := sembuf{0, 1, 0x1000}
	id := uintptr(set.ID())
	b.ReportAllocs()
	for b.Loop() {
		if _, _, e := unix.Syscall6(unix.SYS_SEMTIMEDOP, id, uintptr(unsafe.Pointer(&p)), 1, 0, 0, 0); e != 0 {
			b.Fatal(e)
		}
		if _, _, e := unix.Syscall6(unix.SYS_SEMTIMEDOP, id, uintptr(unsafe.Pointer(&v)), 1, 0, 0, 0); e != 0 {
			b.Fatal(e)
		}
	}
}

// BenchmarkAcquireRelease is Acquire(1)+Release(1) through the driver,
// uncontended.
func BenchmarkAcquireRelease(b *testing.B) {
	ns := newNS(b)
	s, err := Open(ns, "bench", 4)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		g, err := s.Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, g, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKillToHold measures the time from the SIGKILL of a process that
// holds every permit to the return of a waiter's Acquire (reported as the
// median, in ms). Each iteration starts a holder process.
func BenchmarkKillToHold(b *testing.B) {
	ns := newNS(b)
	s, err := Open(ns, "kill", 1)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		h := spawn(b, "hold", ns, "kill", 1, "")
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
		waitFor(b, func() bool { in, _ := Inspect(ns, "kill"); return in.Waiters == 1 })
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
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
}

// BenchmarkRatioToRaw alternates rounds of raw semop P+V and of driver
// Acquire+Release on the same machine state and reports the median ratio of
// their times, which a loaded machine disturbs less than two separate runs.
func BenchmarkRatioToRaw(b *testing.B) {
	ns := newNS(b)
	s, err := Open(ns, "ratio", 4)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	set, _, err := ipc.CreateSemSet(1)
	if err != nil {
		b.Fatal(err)
	}
	defer set.Remove()
	if err := set.TryOp([]ipc.SemOp{{Op: 1}}); err != nil {
		b.Fatal(err)
	}
	type sembuf struct {
		num      uint16
		op, flag int16
	}
	p, v := sembuf{0, -1, 0x1000}, sembuf{0, 1, 0x1000}
	id := uintptr(set.ID())
	ctx := context.Background()
	const round = 2000
	var ratios []float64
	for b.Loop() {
		t0 := time.Now()
		for range round {
			unix.Syscall6(unix.SYS_SEMTIMEDOP, id, uintptr(unsafe.Pointer(&p)), 1, 0, 0, 0)
			unix.Syscall6(unix.SYS_SEMTIMEDOP, id, uintptr(unsafe.Pointer(&v)), 1, 0, 0, 0)
		}
		raw := time.Since(t0)
		t0 = time.Now()
		for range round {
			g, err := s.Acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Release(ctx, g, 1); err != nil {
				b.Fatal(err)
			}
		}
		ratios = append(ratios, float64(time.Since(t0))/float64(raw))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x-raw-median")
}
