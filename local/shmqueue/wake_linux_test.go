//go:build linux

package shmqueue

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"golang.org/x/sys/unix"
)

// A producer puts a few jobs at a time to claimants (handles of their
// own) that are claiming, spinning or asleep, and waits for them all to
// be claimed before the next few: a wake-up that is lost (a waker that
// counts on a claimant no wake-up reaches, or on a spinner that is gone)
// leaves a job ready while every claimant sleeps, and the round stalls.
func TestNoLostWakeUps(t *testing.T) {
	ns, err := ipc.OpenNamespace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	openQ := func() *Queue {
		q, err := OpenEntry(ns.Resolve(Kind, "w"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	prod := openQ()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var claimed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		q := openQ()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := q.Claim(ctx, 1, true)
				if err != nil {
					return
				}
				claimed.Add(1)
				_ = q.Ack(ctx, cs[0])
			}
		}()
	}
	job := driver.PutJob{Payload: []byte("w"), MaxAttempts: 1}
	rounds, put := 3000, int64(0)
	if testing.Short() {
		rounds = 500
	}
	for r := range rounds {
		k := 1 + rand.IntN(3)
		for range k {
			if _, err := prod.Put(ctx, []driver.PutJob{job}); err != nil {
				t.Fatal(err)
			}
		}
		put += int64(k)
		deadline := time.Now().Add(5 * time.Second)
		for claimed.Load() < put {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of %d jobs claimed after 5s, with %d claimants counted asleep", r, claimed.Load(), put, prod.u32(offSleepers).Load())
			}
			time.Sleep(time.Duration(rand.IntN(3)) * 10 * time.Microsecond)
		}
		if r%4 == 0 {
			time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond) // let them fall asleep
		}
	}
	cancel()
	wg.Wait()
}

// A claimant killed in its spin on an empty queue leaves the spinner's
// word behind, and a Put that finds it wakes no sleeper (the spinner would
// have taken the job): the death of that participant wakes the sleepers,
// so a claimant asleep meanwhile gets the job as soon as it is reaped.
func TestDeadSpinnerWakesSleepers(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	pid, _ := joinOther(t, q)
	got := claimLater(t, ctx, q)
	waitAsleep(t, q)
	// The other process "spins" for a second from now, as a spinner
	// killed at once would have left its word.
	q.u32(offSpinner).Store(uint32(time.Now().UnixNano()>>spinUnit) + 1000)
	put(t, q, "job")
	select {
	case c := <-got:
		t.Fatalf("claimed %+v: the Put woke the sleeper although a claimant spun", c)
	case <-time.After(100 * time.Millisecond):
	}
	t0 := time.Now()
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got:
		if el := time.Since(t0); el > 500*time.Millisecond {
			t.Errorf("the sleeper got the job %v after the spinner was killed", el)
		}
		if string(c.Payload) != "job" {
			t.Errorf("claimed %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a sleeper never got the job a killed spinner would have taken")
	}
}

// A claimant killed in its spin, whose death was handled before the next
// Put: that Put is not counted on the dead spin, and wakes the sleeper.
func TestPutAfterDeadSpinnerWakesSleepers(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	pid, _ := joinOther(t, q)
	got := claimLater(t, ctx, q)
	waitAsleep(t, q)
	// The other process "spins" for a second from now, and dies.
	q.u32(offSpinner).Store(uint32(time.Now().UnixNano()>>spinUnit) + 1000)
	gen := q.u64(offProcGen).Load()
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); q.u64(offProcGen).Load() == gen; {
		if time.Now().After(deadline) {
			t.Fatal("the dead participant was not taken off")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the claimant looks, and sleeps again
	waitAsleep(t, q)
	put(t, q, "job")
	select {
	case c := <-got:
		if string(c.Payload) != "job" {
			t.Errorf("claimed %+v", c)
		}
	case <-time.After(time.Second):
		t.Fatal("the sleeper did not get the job put after the spinner's death")
	}
}

// A spinner that the system stopped is counted on for one job, not for
// every job put while it does not run: the second Put wakes a sleeper.
func TestStoppedSpinnerTakesOneJob(t *testing.T) {
	ctx := context.Background()
	q := open(t)
	got := claimLater(t, ctx, q)
	waitAsleep(t, q)
	// A spinner's word, live for a second, whose spinner does not run.
	q.u32(offSpinner).Store(uint32(time.Now().UnixNano()>>spinUnit) + 1000)
	put(t, q, "one")
	put(t, q, "two")
	select {
	case c := <-got:
		if string(c.Payload) != "one" {
			t.Errorf("claimed %+v", c)
		}
	case <-time.After(500 * time.Millisecond):
		t.Fatal("two jobs put while a stopped spinner's word was live: the sleeper was not woken")
	}
}

// claimLater claims one job of q in the background, waiting; the channel
// gets the claim, or is closed on an error.
func claimLater(t *testing.T, ctx context.Context, q *Queue) <-chan driver.Claim {
	got := make(chan driver.Claim, 1)
	go func() {
		cs, err := q.Claim(ctx, 1, true)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- cs[0]
	}()
	return got
}

// waitAsleep waits until a claimant of q is counted asleep.
func waitAsleep(t *testing.T, q *Queue) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); q.u32(offSleepers).Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the claimant did not fall asleep")
		}
		time.Sleep(time.Millisecond)
	}
}
