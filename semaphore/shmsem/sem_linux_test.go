//go:build linux

package shmsem

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// FIFO across processes: Acquire(4) of a semaphore of 4 gets its permits
// while 4 other processes keep taking and giving back 1 permit each, which
// between them leave all 4 free together almost never.
func TestLargeNotStarved(t *testing.T) {
	ns := newNS(t)
	s := open(t, ns, "fifo", 4)
	for range 4 {
		spawn(t, ns, "fifo", "cycle", 4, 1).expect(t, "ready")
	}
	waitFor(t, "cyclers running", func() bool { return s.Available() < 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		t0 := time.Now()
		g, err := s.Acquire(ctx, 4)
		if err != nil {
			t.Fatalf("Acquire(4) behind processes cycling Acquire(1): %v after %v", err, time.Since(t0))
		}
		t.Logf("Acquire(4) after %v", time.Since(t0))
		// Another process's Acquire adds to its own slot before it sums and
		// takes back what does not fit, so a reading may be below 0, never
		// above.
		if a := s.Available(); a > 0 {
			t.Errorf("%d permits free while Acquire(4) holds", a)
		}
		if err := s.Release(ctx, g, 4); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A holder SIGKILLed gives its permits back to a waiter; TryAcquire also
// reclaims them. A waiter killed in the queue does not block those behind.
func TestKillHolder(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	s := open(t, ns, "k", 3)
	h := spawn(t, ns, "k", "hold", 3, 2)
	h.expect(t, "held")
	got := make(chan error, 1)
	go func() {
		g, err := s.Acquire(ctx, 2)
		if err == nil {
			err = s.Release(ctx, g, 2)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Acquire(2) with 1 of 3 free: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	h.kill()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not get the permits of a killed holder")
	}

	h = spawn(t, ns, "k", "hold", 3, 3)
	h.expect(t, "held")
	if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("TryAcquire with none free: %v", err)
	}
	// A waiter of another process queues behind the holder, and is killed.
	w := spawn(t, ns, "k", "hold", 3, 1)
	waitFor(t, "waiter queued", func() bool { in, _ := Inspect(ns, "k"); return in.Waiters == 1 })
	w.kill()
	h.kill()
	g, err := s.TryAcquire(ctx, 3)
	if err != nil {
		in, _ := Inspect(ns, "k")
		t.Fatalf("TryAcquire(3) after the holder and the waiter died: %v (%+v)", err, in)
	}
	if err := s.Release(ctx, g, 3); err != nil {
		t.Fatal(err)
	}
	if in, err := Inspect(ns, "k"); err != nil || len(in.Holders) != 0 || in.Waiters != 0 {
		t.Fatalf("after: %+v, %v", in, err)
	}
}

// A slot that names this process's pid with another start time belongs to
// a dead process that had the pid before: its permits are reclaimed.
func TestPIDReuse(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	s := open(t, ns, "u", 2)
	o := open(t, ns, "u", 2)
	o.ident.Store(uint64(o.self.Tag()+1)<<32 | uint64(o.self.PID))
	o.held.Add(2)
	g, err := s.Acquire(ctx, 2)
	if err != nil {
		t.Fatalf("Acquire over a holder of a reused pid: %v", err)
	}
	if err := s.Release(ctx, g, 2); err != nil {
		t.Fatal(err)
	}
}

// Bad arguments are refused and create nothing; another capacity is a
// mismatch; partial releases; a release beyond the grant is refused.
func TestArguments(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	for _, n := range []int64{0, -1, MaxPermits + 1} {
		if _, err := Open(ns, "a", n); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("Open with %d permits: %v", n, err)
		}
	}
	if _, err := Open(ns, "", 1); !errors.Is(err, baton.ErrInvalidName) {
		t.Errorf("Open of an empty name: %v", err)
	}
	if _, err := Inspect(ns, "a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("refused opens created something: %v", err)
	}
	s := open(t, ns, "a", 3)
	if _, err := Open(ns, "a", 4); !errors.Is(err, baton.ErrMismatch) {
		t.Errorf("Open with another capacity: %v", err)
	}
	if _, err := s.Acquire(ctx, 4); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Acquire beyond the capacity: %v", err)
	}
	g, err := s.Acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, g, 4); !errors.Is(err, baton.ErrNotHeld) {
		t.Errorf("Release beyond the grant: %v", err)
	}
	if err := s.Release(ctx, g, 1); err != nil {
		t.Fatal(err)
	}
	if a := s.Available(); a != 1 {
		t.Fatalf("after a partial release: %d free, want 1", a)
	}
	g.N = 2
	if err := s.Release(ctx, g, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, driver.Grant{N: 1}, 1); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Release of a foreign grant: %v", err)
	}
}

// A cancelled waiter leaves the queue: the waiter behind it is served.
func TestCancelInQueue(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	s := open(t, ns, "c", 2)
	hold, err := s.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := open(t, ns, "c", 2), open(t, ns, "c", 2)
	actx, cancel := context.WithCancel(ctx)
	aerr := make(chan error, 1)
	go func() { _, err := a.Acquire(actx, 2); aerr <- err }()
	waitFor(t, "a queued", func() bool { in, _ := Inspect(ns, "c"); return in.Waiters == 1 })
	bg := make(chan error, 1)
	go func() {
		g, err := b.Acquire(ctx, 1)
		if err == nil {
			err = b.Release(ctx, g, 1)
		}
		bg <- err
	}()
	waitFor(t, "b queued", func() bool { in, _ := Inspect(ns, "c"); return in.Waiters == 2 })
	t0 := time.Now()
	cancel()
	if err := <-aerr; !errors.Is(err, context.Canceled) || time.Since(t0) > time.Second {
		t.Fatalf("cancelled Acquire: %v after %v", err, time.Since(t0))
	}
	if err := s.Release(ctx, hold, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bg:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter behind a cancelled one was not served")
	}
}

// Remove fires the loss of the handles on the removed file.
func TestRemove(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	s := open(t, ns, "x", 2)
	g, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := List(ns); err != nil || len(ls) != 1 || ls[0].Capacity != 2 || len(ls[0].Holders) != 1 || ls[0].Holders[0].N != 1 {
		t.Fatalf("List: %+v, %v", ls, err)
	}
	if err := Remove(ns, "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Loss.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("loss did not fire after Remove")
	}
	if err := s.Release(ctx, g, 1); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Release after Remove: %v", err)
	}
	if err := Remove(ns, "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove again: %v", err)
	}
}

// A reclaimer must not clear the count of a handle that claimed the slot of
// a dead holder after the reclaimer began looking at it: here, between the
// reclaimer's two reads of the slot, another reclaimer frees it and a new
// handle claims it and takes a permit, which must stay held.
func TestReclaimRacesClaim(t *testing.T) {
	ns := newNS(t)
	ctx := context.Background()
	s := open(t, ns, "rc", 2)
	o := open(t, ns, "rc", 2)
	dead := uint64(o.self.Tag()+1)<<32 | uint64(o.self.PID)
	o.ident.Store(dead) // a holder of a process that had our pid before
	o.held.Add(1)
	var n *Sem
	var g driver.Grant
	betweenReads = func(slot int) {
		id, held, _ := s.slotAt(slot)
		if slot != 1 || n != nil {
			return
		}
		h := held.Load()
		held.CompareAndSwap(h, (h>>32+1)<<32) // the other reclaimer
		id.CompareAndSwap(dead, 0)
		n = open(t, ns, "rc", 2) // claims the freed slot
		var err error
		if g, err = n.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { betweenReads = nil }()
	s.reclaimDead()
	if n == nil {
		t.Fatal("the race was not staged")
	}
	if err := n.Release(ctx, g, 1); err != nil {
		t.Fatalf("Release by the handle that claimed the slot: %v", err)
	}
}

// Rounds of processes that exit without closing their handles, each round
// claiming the slots the last one left while the others of the round
// reclaim them too: no live handle ever has its permits taken back (a
// reclaimer that read the ident of the dead owner, and the count after a
// new owner had claimed the slot, used to clear the new owner's count).
func TestSlotReuseKeepsHolds(t *testing.T) {
	ns := newNS(t)
	open(t, ns, "reuse", 1)
	for round := range 10 {
		var ps []*proc
		for range 4 {
			ps = append(ps, spawn(t, ns, "reuse", "contend", 1, 200))
		}
		for _, p := range ps {
			line, _ := p.out.ReadString('\n')
			if err := p.cmd.Wait(); err != nil {
				t.Fatalf("round %d: helper: %v (%q)", round, err, line)
			}
		}
	}
}
