package baton

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
)

// coreHandleBytes is the most Go heap the core may keep per open Mutex
// handle (the driver's share is the backend's).
const coreHandleBytes = 288

// TestHandleHeap: the core's own share of the Go heap of an open Mutex
// handle, measured over drivers that allocate nothing per handle. Users
// keep a handle per row or per tenant, thousands of them.
func TestHandleHeap(t *testing.T) {
	b := NewBackend(&errBackend{})
	defer b.Close()
	ctx := context.Background()
	const n = 2000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	ms := make([]Mutex, 0, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, name := range names {
		m, err := b.Mutex(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%.0f B per open Mutex handle in the core", per)
	if per > coreHandleBytes {
		t.Errorf("the core keeps %.0f B per open Mutex handle, want at most %d", per, coreHandleBytes)
	}
	runtime.KeepAlive(ms)
}

// TestLossLazy: a Loss makes its channel on the first Done, before or
// after it fired, and that channel is closed by the loss.
func TestLossLazy(t *testing.T) {
	fired := driver.NewLoss()
	fired.Fire(errors.New("gone"))
	select {
	case <-fired.Done():
	default:
		t.Error("Done of a Loss fired before it was asked for is not closed")
	}
	waited := driver.NewLoss()
	ch := waited.Done()
	if ch != waited.Done() {
		t.Error("Done returned two channels")
	}
	go waited.Fire(nil)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed by Fire")
	}
	if !errors.Is(waited.Err(), ErrLost) || !errors.Is(fired.Err(), ErrLost) {
		t.Errorf("Err: %v, %v", waited.Err(), fired.Err())
	}
}
