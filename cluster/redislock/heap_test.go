package redislock

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// handleHeap returns the Go heap that one open handle keeps, on average
// over n handles of distinct names opened by open.
func handleHeap(t *testing.T, n int, open func(i int) any) float64 {
	t.Helper()
	keep := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = open(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// TestHandleHeap bounds the heap an open Mutex handle keeps: through the
// Backend applications use (handleBudget), and the driver's share alone
// (driverBudget). Users keep a handle per row or per tenant, thousands.
func TestHandleHeap(t *testing.T) {
	s := startRedis(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { c.Close() })
	d, err := newDriver(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	b := open(t, s.URL(testQuery))
	ctx := context.Background()
	const n = 4000
	drv := handleHeap(t, n, func(i int) any {
		l, err := d.OpenMutex(ctx, "heap-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
	all := handleHeap(t, n, func(i int) any {
		m, err := b.Mutex(ctx, "heap-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
	t.Logf("heap per open Mutex handle: %.0f B (driver %.0f B)", all, drv)
	if all > handleBudget {
		t.Errorf("an open Mutex handle keeps %.0f B of heap, more than %d B", all, handleBudget)
	}
	if drv > driverBudget {
		t.Errorf("an open Mutex driver keeps %.0f B of heap, more than %d B", drv, driverBudget)
	}
}

// Budgets of the heap of one open Mutex: the whole handle, core and pass
// line included, and the driver's share, which keeps the name's key base
// and its struct, with no channel or logger until it waits.
const (
	handleBudget = 512
	driverBudget = 192
)
