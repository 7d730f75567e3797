package locktest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/batonlock/baton"
)

// HandleBytes opens n handles of kind (Mutex, RWMutex or Semaphore of one
// permit), each on a name of its own, and returns the Go heap they keep
// while open, per handle: the growth of HeapAlloc between a collection
// before and one after. It measures three rounds, closing the handles of
// each before the next, and returns the median, since HeapAlloc counts the
// whole process and another goroutine may allocate during a round.
func HandleBytes(b baton.Backend, kind baton.Kind, prefix string, n int) (float64, error) {
	var per [3]float64
	for r := range per {
		p, err := handleBytes(b, kind, fmt.Sprintf("%s-r%d", prefix, r), n)
		if err != nil {
			return 0, err
		}
		per[r] = p
	}
	slices.Sort(per[:])
	return per[1], nil
}

func handleBytes(b baton.Backend, kind baton.Kind, prefix string, n int) (float64, error) {
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	type closer interface{ Close() error }
	hs := make([]closer, 0, n+1)
	defer func() {
		for _, h := range hs {
			h.Close()
		}
	}()
	open := func(name string) (closer, error) {
		switch kind {
		case baton.KindRWMutex:
			return b.RWMutex(ctx, name)
		case baton.KindSemaphore:
			return b.Semaphore(ctx, name, 1)
		default:
			return b.Mutex(ctx, name)
		}
	}
	// A first handle sets up what a backend keeps once (watchers, maps).
	h, err := open(prefix + "-warm")
	if err != nil {
		return 0, err
	}
	hs = append(hs, h)
	var before, after runtime.MemStats
	settleHeap()
	runtime.ReadMemStats(&before)
	for _, name := range names {
		h, err := open(name)
		if err != nil {
			return 0, err
		}
		hs = append(hs, h)
	}
	settleHeap()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(names)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n), nil
}

// testHandleMemory reports the Go heap an open handle keeps, per
// primitive the backend has.
func testHandleMemory(t *testing.T, e *env) {
	b := e.open(t)
	kinds := []baton.Kind{baton.KindMutex}
	if e.s.Caps.RWMutex {
		kinds = append(kinds, baton.KindRWMutex)
	}
	if e.s.Caps.Semaphore {
		kinds = append(kinds, baton.KindSemaphore)
	}
	n := 500
	if e.s.Caps.Lease {
		n = 100
	}
	for _, k := range kinds {
		per, err := HandleBytes(b, k, e.name(t), n)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		t.Logf("%s: %.0f B of Go heap per open handle", k, per)
	}
}

// settleHeap collects until the heap stops shrinking: objects with cleanups
// or finalizers, and garbage an earlier test left, take more than one
// cycle to go, and would otherwise count against the handles.
func settleHeap() {
	var m runtime.MemStats
	last := ^uint64(0)
	for range 10 {
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.HeapAlloc >= last {
			return
		}
		last = m.HeapAlloc
	}
}
