package zklock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestValueWaitReconnect: a write made while the waiter's connection is
// cut reaches the waiter once it reconnects (the client sets its watches
// again, and the server fires those whose node changed meanwhile).
func TestValueWaitReconnect(t *testing.T) {
	addr := standalone(t)
	p := startProxy(t, addr)
	ctx := context.Background()
	prefix := fmt.Sprintf("value-%d", time.Now().UnixNano())
	waiter := open(t, fmt.Sprintf("zk://%s/%s?ttl=5s", p.addr, prefix))
	writer := open(t, fmt.Sprintf("zk://%s/%s?ttl=5s", addr, prefix))
	w, err := waiter.Value(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	v, err := writer.Value(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cur, err := v.CompareAndSwap(ctx, 0, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var data []byte
	var ver uint64
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var err error
		data, ver, err = w.Wait(wctx, cur)
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // the watch is set
	p.cut.Store(true)
	next, err := v.CompareAndSwap(ctx, cur, []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("Wait returned through a cut connection: %v", err)
	default:
	}
	p.heal()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if ver != next || string(data) != "second" {
			t.Errorf("Wait = %q, %d; want second, %d", data, ver, next)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a write made while the waiter was cut off never woke it")
	}
}

// TestValueRecreated: a node removed and made again starts its own
// version count from 0, but the Value's version, its Mzxid, still only
// grows, so a CompareAndSwap against a version of the old node fails.
func TestValueRecreated(t *testing.T) {
	addr := standalone(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("value-%d", time.Now().UnixNano())
	b := open(t, fmt.Sprintf("zk://%s/%s", addr, prefix))
	v, err := b.Value(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	v1, err := v.CompareAndSwap(ctx, 0, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := v.CompareAndSwap(ctx, v1, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, []string{addr}, 5*time.Second)
	if err := c.Delete("/"+prefix+"/value/v", -1); err != nil {
		t.Fatal(err)
	}
	if data, ver, err := v.Load(ctx); data != nil || ver != 0 || err != nil {
		t.Fatalf("Load of a removed node: %q, %d, %v", data, ver, err)
	}
	if now, err := v.CompareAndSwap(ctx, v2, []byte("stale")); !errors.Is(err, baton.ErrConflict) || now != 0 {
		t.Errorf("CompareAndSwap against the removed node's version: %d, %v", now, err)
	}
	v3, err := v.CompareAndSwap(ctx, 0, []byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	if v3 <= v2 {
		t.Errorf("version %d after recreation, not above %d", v3, v2)
	}
	// The node's own version is 1 again, as it was when v2 was written:
	// a CAS of this handle against v1 or v2 must not pass for it.
	for _, old := range []uint64{v1, v2} {
		if _, err := v.CompareAndSwap(ctx, old, []byte("stale")); !errors.Is(err, baton.ErrConflict) {
			t.Errorf("CompareAndSwap(%d) on the new node: %v", old, err)
		}
	}
	if data, _, err := c.Get("/" + prefix + "/value/v"); err != nil || string(data) != "c" {
		t.Errorf("node data %q, %v", data, err)
	}
}

// TestValueCancelledWaitsLeaveNoWatch: the client keeps every watch set
// until the node changes, so Waits ended by their contexts must not set
// one each; a handle's Waits share its pending watch. Measured as the
// heap kept after many such Waits with no write.
func TestValueCancelledWaitsLeaveNoWatch(t *testing.T) {
	addr := standalone(t)
	ctx := context.Background()
	b := open(t, fmt.Sprintf("zk://%s/value-%d", addr, time.Now().UnixNano()))
	v, err := b.Value(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	cur, err := v.CompareAndSwap(ctx, 0, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	wait := func(n int) {
		for range n {
			wctx, cancel := context.WithTimeout(ctx, 200*time.Microsecond)
			_, _, err := v.Wait(wctx, cur)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait with no write: %v", err)
			}
		}
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	wait(100)
	before := heap()
	const n = 4000
	wait(n)
	after := heap()
	// A watch the client keeps costs a channel with a buffered event, well
	// over 100 bytes.
	if grown := int64(after) - int64(before); grown > n*50 {
		t.Errorf("the heap grew by %d bytes over %d cancelled Waits", grown, n)
	} else {
		t.Logf("heap grew by %d bytes over %d cancelled Waits", grown, n)
	}
}
