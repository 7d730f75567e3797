package mutex

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/word"
)

// TestMutexStaleHandoff: a handoff whose waiter was killed between its
// wake-up and its claim, with the killed waiters still counted, is
// reserved for handoffGrace and then taken by anyone: by TryAcquire, by an
// Acquire that came before it went stale (and must not sleep past it), and
// by one that comes after.
func TestMutexStaleHandoff(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	m := openM(t, ns, "h")
	leave := func() {
		m.state().Store(fHandoff | fWaiters)
		m.wait().Store(3) // three waiters killed in their wait
	}

	leave()
	m.handoffAt().Store(monoNow())
	if _, err := m.TryAcquire(ctx, driver.Exclusive); !errors.Is(err, baton.ErrLocked) {
		t.Fatalf("fresh handoff: TryAcquire = %v, want ErrLocked", err)
	}
	t0 := time.Now()
	g, err := m.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatalf("Acquire during the handoff: %v", err)
	}
	if d := time.Since(t0); d < handoffGrace/2 || d > 2*time.Second {
		t.Errorf("Acquire during a fresh handoff took %v, want about %v", d, handoffGrace)
	}
	if err := m.Release(ctx, g); err != nil {
		t.Fatal(err)
	}

	leave()
	m.handoffAt().Store(monoNow() - int64(handoffGrace))
	g, err = m.TryAcquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatalf("stale handoff: TryAcquire = %v", err)
	}
	m.Release(ctx, g)

	leave()
	m.handoffAt().Store(monoNow() - int64(handoffGrace))
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if g, err = m.Acquire(cctx, driver.Exclusive); err != nil {
		t.Fatalf("stale handoff: Acquire = %v", err)
	}
	m.Release(ctx, g)
	m.wait().Store(0)
}

// TestMutexHandoffToNobody: an unlock that hands off to waiters none of
// which sleeps any more (killed while counted) leaves the lock free, not
// reserved.
func TestMutexHandoffToNobody(t *testing.T) {
	ns := testNS(t)
	ctx := context.Background()
	m := openM(t, ns, "n")
	g, err := m.Acquire(ctx, driver.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	m.wait().Store(2)
	m.state().Store(m.state().Load() | fWaiters | fStarving)
	if err := m.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if s := m.state().Load(); s != 1<<word.TokenShift {
		t.Fatalf("state after a handoff to nobody = %#x, want free with the next token's bits (%#x)", s, uint64(1)<<word.TokenShift)
	}
	m.wait().Store(0)
}
