//go:build linux

package shmchan

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

func openTest(t testing.TB, ns *ipc.Namespace, name string, capacity, max int) *Chan {
	t.Helper()
	return openKind(t, ns, name, capacity, max, false)
}

func testNS(t testing.TB) *ipc.Namespace {
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// dump describes the ring for a failure.
func (c *Chan) dump() string {
	s := fmt.Sprintf("head %d tail %d recvflag %d sendflag %d closed %v\n", c.u64(offHead).Load(), c.u64(offTail).Load(),
		c.u32(offRecvFlag).Load(), c.u32(offSendFlag).Load(), c.closed())
	for i := range c.capacity {
		v := c.state(i).Load()
		s += fmt.Sprintf("  slot %d: lap %d phase %d owner %d\n", i, lapOf(v), phaseOf(v), v>>ownerShift&(tableSize-1))
	}
	return s
}

func TestRingStress(t *testing.T) {
	ns := testNS(t)
	const senders, receivers, per = 4, 4, 5000
	var hs []*Chan
	for range 3 {
		hs = append(hs, openTest(t, ns, "s", 8, 32))
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var got sync.Map
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				msg := []byte(fmt.Sprint(s, ":", i))
				if _, err := hs[s%3].Send(ctx, [][]byte{msg}, true); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var rg sync.WaitGroup
	for r := range receivers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				_, err := hs[r%3].Recv(ctx, 1+r%2*3, true, func(m []byte) {
					if _, dup := got.LoadOrStore(string(m), r); dup {
						t.Errorf("%s twice", m)
					}
				})
				if err != nil {
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("senders stuck:\n%s", hs[0].dump())
	}
	hs[0].CloseSend(ctx)
	rg.Wait()
}

// pong echoes every message of c back on the channel "r" of ns.
func pong(ns *ipc.Namespace, c *Chan) error {
	r, err := OpenEntry(ns.Resolve(Kind, "r"), 0, 0, false)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	ctx := context.Background()
	buf := make([]byte, 0, r.maxMsg)
	for {
		if _, err := c.Recv(ctx, 1, true, func(m []byte) { buf = append(buf[:0], m...) }); err != nil {
			return err
		}
		if _, err := r.Send(ctx, [][]byte{buf}, true); err != nil {
			return err
		}
	}
}

// A message whose Send returned before CloseSend is taken before the end,
// also by receivers that were looking at the empty head when the Send
// reserved it (they poll with non-blocking receives, to widen that
// window).
func TestCloseAfterSend(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	for i := range 300 {
		c := openTest(t, ns, fmt.Sprint("c", i), 2, 8)
		got := make(chan int, 2)
		for range 2 {
			go func() {
				n := 0
				for {
					k, err := c.Recv(ctx, 1, false, func([]byte) {})
					n += k
					if err != nil && err != baton.ErrChannelEmpty {
						got <- n
						return
					}
				}
			}()
		}
		if _, err := c.Send(ctx, [][]byte{[]byte("m")}, true); err != nil {
			t.Fatal(err)
		}
		if err := c.CloseSend(ctx); err != nil {
			t.Fatal(err)
		}
		if n := <-got + <-got; n != 1 {
			t.Fatalf("round %d: took %d messages before the end, want 1", i, n)
		}
	}
}

// Laps wrap at 52 bits: a ring whose positions cross the wrap keeps its
// order and loses nothing.
func TestLapWrap(t *testing.T) {
	if d := lapDiff(0, lapMask); d != 1 {
		t.Errorf("lapDiff(0, lapMask) = %d, want 1", d)
	}
	if d := lapDiff(lapMask, 0); d != -1 {
		t.Errorf("lapDiff(lapMask, 0) = %d, want -1", d)
	}
	if v := mk(lapMask+1, 3, phaseReading); lapOf(v) != 0 || ownerOf(v) != 3 || phaseOf(v) != phaseReading {
		t.Errorf("mk past the wrap: lap %d owner %d phase %d", lapOf(v), ownerOf(v), phaseOf(v))
	}
	ns := testNS(t)
	const capacity = 4
	c := openTest(t, ns, "c", capacity, 16)
	start := uint64(lapMask-1) * capacity // two laps before the wrap
	c.u64(offHead).Store(start)
	c.u64(offTail).Store(start)
	for i := range uint64(capacity) {
		c.state(start + i).Store(mk(c.lap(start+i), 0, phaseEmpty))
	}
	ctx := context.Background()
	for i := range 5 * capacity {
		if _, err := c.Send(ctx, [][]byte{[]byte(fmt.Sprint(i))}, false); err != nil {
			t.Fatalf("send %d: %v\n%s", i, err, c.dump())
		}
		var got string
		if _, err := c.Recv(ctx, 1, false, func(m []byte) { got = string(m) }); err != nil || got != fmt.Sprint(i) {
			t.Fatalf("recv %d: %q, %v\n%s", i, got, err, c.dump())
		}
	}
	if h := c.u64(offHead).Load(); c.lap(h) != 3 { // lapMask-1 + 5 laps
		t.Errorf("the head's lap is %d, want 3: the positions did not cross the wrap", c.lap(h))
	}
}

// openKind is openTest for a channel of either kind.
func openKind(t testing.TB, ns *ipc.Namespace, name string, capacity, max int, one bool) *Chan {
	t.Helper()
	c, err := OpenEntry(ns.Resolve(Kind, name), capacity, max, one)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
