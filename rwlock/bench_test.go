//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package rwlock

import (
	"context"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/locktest"
)

// BenchmarkRawSemopPair is the floor: one semop taking and one giving back
// a semaphore with SEM_UNDO, straight through the syscall.
func BenchmarkRawSemopPair(b *testing.B) {
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
	for b.Loop() {
		if _, _, e := unix.Syscall6(unix.SYS_SEMTIMEDOP, id, uintptr(unsafe.Pointer(&p)), 1, 0, 0, 0); e != 0 {
			b.Fatal(e)
		}
		if _, _, e := unix.Syscall6(unix.SYS_SEMTIMEDOP, id, uintptr(unsafe.Pointer(&v)), 1, 0, 0, 0); e != 0 {
			b.Fatal(e)
		}
	}
}

// BenchmarkRLockRUnlock is a read lock and its release through the driver,
// uncontended.
func BenchmarkRLockRUnlock(b *testing.B) {
	l := open(b, newNS(b), "bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		g, err := l.Acquire(ctx, driver.Shared)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx, g); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlock is a write lock (with its fencing token) and its
// release through the driver, uncontended.
func BenchmarkLockUnlock(b *testing.B) {
	l := open(b, newNS(b), "bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		g, err := l.Acquire(ctx, driver.Exclusive)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx, g); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRLockRUnlockCore is the same through the baton core (a Backend
// over this driver).
func BenchmarkRLockRUnlockCore(b *testing.B) {
	ns := newNS(b)
	be := baton.NewBackend(&sysvDriver{ns: ns})
	defer be.Close()
	ctx := context.Background()
	m, err := be.RWMutex(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.RLock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.RUnlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKillToHold measures the time from the SIGKILL of a process that
// holds the write lock to the return of a waiting writer's Acquire
// (reported as the median, in ms).
func BenchmarkKillToHold(b *testing.B) {
	ns := newNS(b)
	l := open(b, ns, "kill")
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		h := spawn(b, ns, "kill", "write")
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
		waitFor(b, "writer waiting", func() bool { return values(b, ns, "kill")[semWW] == 1 })
		time.Sleep(time.Millisecond) // into the kernel wait
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

// BenchmarkRatioToRaw alternates rounds of a raw semop pair and of driver
// RLock+RUnlock and reports the median ratio of their times, which a loaded
// machine disturbs less than two separate runs.
func BenchmarkRatioToRaw(b *testing.B) {
	l := open(b, newNS(b), "ratio")
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
			g, err := l.Acquire(ctx, driver.Shared)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx, g); err != nil {
				b.Fatal(err)
			}
		}
		ratios = append(ratios, float64(time.Since(t0))/float64(raw))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x-raw-median")
}
