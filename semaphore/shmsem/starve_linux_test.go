//go:build linux

package shmsem

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// stoppedSecond sets up a queue on a capacity-1 semaphore called name: s
// holds the permit, c queues first (and gives the permit back as soon as
// it has it), a helper process queues second. After wait, the helper is
// stopped and s releases, so that c is served and the stopped helper is
// the head. It returns s and the helper, continued at the end of the test.
func stoppedSecond(t *testing.T, name string, wait time.Duration) (*Sem, *proc) {
	ns := newNS(t)
	ctx := context.Background()
	s := open(t, ns, name, 1)
	c := open(t, ns, name, 1)
	g, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	cg := make(chan error, 1)
	go func() {
		g, err := c.Acquire(ctx, 1)
		if err == nil {
			err = c.Release(ctx, g, 1)
		}
		cg <- err
	}()
	waitFor(t, "c to queue", func() bool {
		in, _ := Inspect(ns, name)
		return in.Waiters == 1
	})
	h := spawn(t, ns, name, "hold", 1, 1)
	waitFor(t, "the helper to queue", func() bool {
		in, _ := Inspect(ns, name)
		return in.Waiters == 2
	})
	time.Sleep(wait)
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.cmd.Process.Signal(syscall.SIGCONT) })
	if err := s.Release(ctx, g, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-cg; err != nil {
		t.Fatal(err)
	}
	return s, h
}

// continued lets the stopped helper run and checks that it is served.
func continued(t *testing.T, h *proc) {
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	h.expect(t, "held")
}

// A head of the queue that has not run since its ticket was served (its
// process not scheduled; here, stopped) is not overtaken for longer than
// starveAfter: those who would take the permits past it queue behind it,
// rather than keep the CPUs it waits for.
func TestHeadNotRunningNotOvertaken(t *testing.T) {
	ctx := context.Background()
	s, h := stoppedSecond(t, "st", 5*time.Millisecond) // asleep in the queue by then
	barged := 0
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		g, err := s.TryAcquire(ctx, 1)
		if errors.Is(err, baton.ErrLocked) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		barged++
		if err := s.Release(ctx, g, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("after %d acquisitions past a head served while stopped, for 1s: TryAcquire %v", barged, err)
	}
	t.Logf("%d acquisitions past the stopped head", barged)
	continued(t, h)
}

// Once a head has starved, the waiters queued behind it that have waited
// as long are served in order: none of them faces a fresh starveAfter of
// others taking past it. Here the head, c, is served after waiting well
// past starveAfter and gives its permit back at once; the next in line, a
// helper process, is stopped, so nothing but the starving word keeps s
// from taking past it.
func TestStarvingQueueDrainsInOrder(t *testing.T) {
	ctx := context.Background()
	s, h := stoppedSecond(t, "dr", 20*starveAfter) // both have waited long
	if g, err := s.TryAcquire(ctx, 1); !errors.Is(err, baton.ErrLocked) {
		if err == nil {
			s.Release(ctx, g, 1)
		}
		t.Fatalf("TryAcquire past a stopped head that queued %v ago, right after the starving head before it: %v", 20*starveAfter, err)
	}
	continued(t, h)
}
