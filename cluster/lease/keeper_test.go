package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func testOpts(t *testing.T) *Config {
	t.Helper()
	return build(t, WithTTL(200*time.Millisecond), WithRenewEvery(40*time.Millisecond), WithDrift(10*time.Millisecond))
}

func build(t *testing.T, opts ...Option) *Config {
	t.Helper()
	c, err := Build(Spec{}, append(opts, WithLogger(quiet)))
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestKeeperRenews(t *testing.T) {
	o := testOpts(t)
	var n atomic.Int32
	loss := driver.NewLoss()
	k := StartKeeper(time.Now(), o, func(ctx context.Context) (time.Time, error) {
		n.Add(1)
		return time.Now(), nil
	}, loss, "x")
	time.Sleep(3 * o.TTL)
	k.Stop()
	if loss.Err() != nil {
		t.Fatalf("loss fired while renewals succeeded: %v", loss.Err())
	}
	if n.Load() < 3 {
		t.Fatalf("%d renewals in 3 TTLs, want at least 3", n.Load())
	}
	if d := time.Until(k.Deadline()); d <= 0 {
		t.Fatalf("deadline %v in the past after renewals", d)
	}
	got := n.Load()
	time.Sleep(3 * o.RenewEvery)
	if n.Load() != got {
		t.Fatal("renewal after Stop")
	}
}

func TestKeeperFiresAtDeadline(t *testing.T) {
	o := testOpts(t)
	loss := driver.NewLoss()
	sent := time.Now()
	k := StartKeeper(sent, o, func(ctx context.Context) (time.Time, error) {
		return time.Now(), errors.New("connection refused")
	}, loss, "x")
	defer k.Stop()
	select {
	case <-loss.Done():
	case <-time.After(5 * o.TTL):
		t.Fatal("loss did not fire after failing renewals")
	}
	if at := time.Now(); at.Before(o.Deadline(sent)) {
		t.Fatalf("loss fired %v before the deadline", o.Deadline(sent).Sub(at))
	}
	if err := loss.Err(); !errors.Is(err, baton.ErrLost) || !contains(err.Error(), "connection refused") {
		t.Fatalf("loss error %v, want ErrLost with the last renewal error", err)
	}
}

func TestKeeperFiresOnLost(t *testing.T) {
	o := testOpts(t)
	loss := driver.NewLoss()
	start := time.Now()
	k := StartKeeper(start, o, func(ctx context.Context) (time.Time, error) {
		return time.Now(), baton.ErrLost
	}, loss, "x")
	defer k.Stop()
	select {
	case <-loss.Done():
	case <-time.After(5 * o.TTL):
		t.Fatal("loss did not fire")
	}
	if d := time.Since(start); d >= o.TTL-o.Drift {
		t.Fatalf("loss fired after %v, want at the first renewal (%v)", d, o.RenewEvery)
	}
}

func TestKeeperStopWaitsForRenewal(t *testing.T) {
	o := testOpts(t)
	started := make(chan struct{})
	var returned atomic.Bool
	k := StartKeeper(time.Now(), o, func(ctx context.Context) (time.Time, error) {
		close(started)
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		returned.Store(true)
		return time.Now(), ctx.Err()
	}, driver.NewLoss(), "x")
	<-started
	k.Stop()
	if !returned.Load() {
		t.Fatal("Stop returned while a renewal was in flight")
	}
	k.Stop() // idempotent
}

func TestKeeperOldLeaseRenewsAtOnce(t *testing.T) {
	o := build(t, WithTTL(2*time.Second), WithRenewEvery(600*time.Millisecond))
	renewed := make(chan time.Time, 1)
	start := time.Now()
	// A lease handed over a while ago: its first renewal is due at once.
	k := StartKeeper(start.Add(-o.TTL/2), o, func(ctx context.Context) (time.Time, error) {
		select {
		case renewed <- time.Now():
		default:
		}
		return time.Now(), nil
	}, driver.NewLoss(), "x")
	defer k.Stop()
	select {
	case at := <-renewed:
		if d := at.Sub(start); d > o.RenewEvery/2 {
			t.Fatalf("first renewal of a lease older than the period after %v", d)
		}
	case <-time.After(o.TTL):
		t.Fatal("no renewal")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestKeeperPass(t *testing.T) {
	o := testOpts(t)
	var lost atomic.Bool
	first, second := driver.NewLoss(), driver.NewLoss()
	k := StartKeeper(time.Now(), o, func(ctx context.Context) (time.Time, error) {
		if lost.Load() {
			return time.Now(), fmt.Errorf("gone: %w", baton.ErrLost)
		}
		return time.Now(), nil
	}, first, "x")
	defer k.Stop()
	if !k.Pass(second) {
		t.Fatal("Pass refused on a live lease")
	}
	lost.Store(true)
	select {
	case <-second.Done():
	case <-time.After(5 * o.TTL):
		t.Fatal("the loss passed to did not fire")
	}
	if first.Err() != nil {
		t.Fatalf("the loss passed from fired: %v", first.Err())
	}
	if k.Pass(driver.NewLoss()) {
		t.Fatal("Pass accepted after the lease was lost")
	}
}

// TestKeeperFrozenLossAtDeadline freezes the keeper (its timers cannot take
// its mutex, as when the process is paused and its timers have not run yet)
// with a renewal that never answers: the hold must read as lost right after
// the deadline, through Err, Lost and the context of Hold.Context.
func TestKeeperFrozenLossAtDeadline(t *testing.T) {
	o := testOpts(t)
	loss := driver.NewLoss()
	unblock := make(chan struct{})
	sent := time.Now()
	k := StartKeeper(sent, o, func(ctx context.Context) (time.Time, error) {
		<-unblock // never answers while frozen
		return time.Now(), errors.New("no answer")
	}, loss, "x")
	k.s.mu.Lock()
	frozen := true
	defer func() {
		if frozen {
			k.s.mu.Unlock()
		}
		close(unblock)
		k.Stop()
	}()
	// Hold.Err, Hold.Lost and Hold.Context read the Loss (see the root
	// package's TestLossDeadline); the keeper must have set its deadline.
	if err := loss.Err(); err != nil {
		t.Fatalf("Err before the deadline: %v", err)
	}
	time.Sleep(time.Until(o.Deadline(sent)) + time.Millisecond)
	if err := loss.Err(); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Err right after the deadline, keeper frozen: %v, want ErrLost", err)
	}
	select {
	case <-loss.Done():
	default:
		t.Error("Done not closed right after the deadline, keeper frozen")
	}
	frozen = false
	k.s.mu.Unlock()
}

// TestKeeperStopTakesDeadlineOff: a hold given back is not reported lost
// when its old deadline passes.
func TestKeeperStopTakesDeadlineOff(t *testing.T) {
	o := testOpts(t)
	loss := driver.NewLoss()
	sent := time.Now()
	k := StartKeeper(sent, o, func(ctx context.Context) (time.Time, error) {
		return time.Now(), nil
	}, loss, "x")
	k.Stop()
	time.Sleep(time.Until(o.Deadline(sent)) + time.Millisecond)
	if err := loss.Err(); err != nil {
		t.Fatalf("a stopped lease read as lost after its deadline: %v", err)
	}
}
