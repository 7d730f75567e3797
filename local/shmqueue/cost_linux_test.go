//go:build linux

package shmqueue

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// A claimant that claims and acks in a loop keeps one watch of the file
// (starting and stopping it per job woke the watcher's goroutine and
// stat'ed the file every time); the watch ends at its first check that
// finds the handle holding no claim.
func TestFileWatchSpansClaims(t *testing.T) {
	q := open(t)
	ctx := context.Background()
	watching := func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.stopFile != nil
	}
	for range 3 {
		put(t, q, "job")
		cs, err := q.Claim(ctx, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, cs[0]); err != nil {
			t.Fatal(err)
		}
		if !watching() {
			t.Fatal("the watch of the file stopped with the Ack of the last claim")
		}
	}
	deadline := time.Now().Add(3*ipc.WatchEvery + time.Second)
	for watching() {
		if time.Now().After(deadline) {
			t.Fatalf("a handle without claims still watches its file after %v", 3*ipc.WatchEvery+time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The watcher checks a watch at once when it starts, which may be after
// the Ack of the claim that started it: that check keeps the watch (a
// claim came since the check before), the next one without a claim in
// between ends it. (A stand-in stops the watch here: no watcher runs.)
func TestFileWatchOutlivesItsFirstCheck(t *testing.T) {
	q := open(t)
	stopped := 0
	q.mu.Lock()
	q.stopFile, q.recent = func() { stopped++ }, true
	q.mu.Unlock()
	for i, want := range []int{0, 1} {
		if err := q.checkFile(); err != nil {
			t.Fatal(err)
		}
		if stopped != want {
			t.Fatalf("check %d with no claim held: the watch was stopped %d times, want %d", i+1, stopped, want)
		}
	}
}

// A Claim that finds a job ready registers nothing on its context, and a
// Put, Claim and Ack allocate little: the claim, its payload and the ids.
func TestPutClaimAckAllocs(t *testing.T) {
	q := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := []driver.PutJob{{Payload: make([]byte, 64), MaxAttempts: 1}}
	cycle := func() {
		if _, err := q.Put(ctx, job); err != nil {
			t.Fatal(err)
		}
		cs, err := q.Claim(ctx, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, cs[0]); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	if n := testing.AllocsPerRun(200, cycle); n > 5 {
		t.Errorf("%.1f allocations per Put+Claim+Ack, want at most 5", n)
	}
}

// A Claim's cancellation may run after the Claim returned, and after the
// handle closed and unmapped its words: it must then touch nothing. With
// one P and the context cancelled as the Claim arms it, the cancellation's
// goroutine runs only after the Close.
func TestCancelAfterClose(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		q, err := OpenEntry(ns.Resolve(Kind, "c"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := q.Claim(ctx, 1, true); err == nil {
			t.Fatal("Claim on an empty queue with a cancelled context claimed")
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
}

// A claim of a job in a slot above 255 allocates no more than one in a
// low slot: its slot number as the claim's Data is made once, not boxed
// per claim. (The job ids, the payload and the claims are the three.)
func TestClaimOfHighSlotAllocs(t *testing.T) {
	q := open(t)
	ctx := context.Background()
	job := []driver.PutJob{{Payload: make([]byte, 64), MaxAttempts: 1}}
	for range 300 {
		if _, err := q.Put(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	cycle := func() {
		if _, err := q.Put(ctx, job); err != nil {
			t.Fatal(err)
		}
		cs, err := q.Claim(ctx, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if i := cs[0].Data.(uint32); i < 256 {
			t.Fatalf("claimed slot %d, want one above 255", i)
		}
		if err := q.Ack(ctx, cs[0]); err != nil {
			t.Fatal(err)
		}
	}
	for range 260 {
		q.Claim(ctx, 1, false) // the low slots, claimed and kept
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n > 3 {
		t.Errorf("%.1f allocations per Put+Claim+Ack of a high slot, want at most 3", n)
	}
}
