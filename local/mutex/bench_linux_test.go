//go:build linux

package mutex

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
)

func BenchmarkSyncMutex(b *testing.B) {
	var mu sync.Mutex
	for b.Loop() {
		mu.Lock()
		mu.Unlock()
	}
}

// BenchmarkMutexUncontended: Acquire+Release of the driver, no waiter.
func BenchmarkMutexUncontended(b *testing.B) {
	m := openM(b, testNS(b), "u")
	ctx := context.Background()
	for b.Loop() {
		g, err := m.Acquire(ctx, driver.Exclusive)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Release(ctx, g); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMutexTwoProcesses: this process and a helper lock and unlock in
// a loop; reports acquisitions per second by both and the longest wait of
// this process.
func BenchmarkMutexTwoProcesses(b *testing.B) {
	ns := testNS(b)
	c, r, err := openCheck(ns, "c")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	m := openM(b, ns, "c")
	cmd := helper(b, "contend", ns.Dir(), "c")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		c.stop.Store(1)
		cmd.Wait()
	}()
	for c.count.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx := context.Background()
	var maxWait time.Duration
	c0 := c.count.Load()
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		g, err := m.Acquire(ctx, driver.Exclusive)
		if err != nil {
			b.Fatal(err)
		}
		if d := time.Since(t0); d > maxWait {
			maxWait = d
		}
		m.Release(ctx, g)
	}
	el := time.Since(start)
	b.StopTimer()
	other := c.count.Load() - c0
	b.ReportMetric(float64(int64(b.N)+other)/el.Seconds(), "acq/s")
	b.ReportMetric(float64(maxWait.Microseconds())/1000, "max-wait-ms")
	b.ReportMetric(float64(b.N)/float64(int64(b.N)+other)*100, "%-this-process")
}

// BenchmarkMutexKillRecover: a helper holds the lock and is SIGKILLed (and
// not reaped: it stays a zombie); reports the time until a waiter in this
// process holds. Run with -benchtime=Nx.
func BenchmarkMutexKillRecover(b *testing.B) {
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		ns := testNS(b)
		cmd := helper(b, "hold", ns.Dir(), "k")
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 64)
		out.Read(buf)
		m := openM(b, ns, "k")
		got := make(chan time.Time)
		go func() {
			g, err := m.Acquire(context.Background(), driver.Exclusive)
			if err != nil || !g.Recovered {
				b.Error("not recovered", err)
			}
			got <- time.Now()
			m.Release(context.Background(), g)
		}()
		time.Sleep(5 * time.Millisecond) // the waiter sleeps
		b.StartTimer()
		t0 := time.Now()
		cmd.Process.Kill()
		lat = append(lat, (<-got).Sub(t0))
		b.StopTimer()
		cmd.Wait()
		m.Close()
		b.StartTimer()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
