package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
)

// TestQueueUnsureEnds: an end of a claim whose answer is lost with the
// connection (the proxy drops the server's replies) may have been applied.
// Once the client is back on its session, ending the claim again reports
// the earlier end's effect (nil for the same kind of end, ErrNotHeld for
// another), not a lost claim, also when the job put back was claimed by
// someone else meanwhile; an end whose request never arrived, of a claim
// whose node someone deleted, is still ErrLost.
func TestQueueUnsureEnds(t *testing.T) {
	a := standalone(t)
	p := startProxy(t, a)
	ttl := 4 * time.Second // the session outlives the lost connection
	prefix := fmt.Sprintf("unsure%d", time.Now().UnixNano())
	cut := open(t, fmt.Sprintf("zk://%s/%s?ttl=%v", p.addr, prefix, ttl))
	direct := open(t, fmt.Sprintf("zk://%s/%s?ttl=%v", a, prefix, ttl))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	probe, err := cut.Queue(ctx, "probe")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	claim := func(t *testing.T, opts ...baton.PutOption) (baton.Queue, baton.Queue, *baton.Job) {
		t.Helper()
		n++
		name := "jobs" + strings.Repeat("x", n)
		q, err := cut.Queue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		other, err := direct.Queue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Put(ctx, []byte("x"), opts...); err != nil {
			t.Fatal(err)
		}
		j, err := q.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return q, other, j
	}
	// lost sends an end whose reply (mute) or request and reply (cut)
	// never arrive, and heals the connection.
	lost := func(t *testing.T, applied bool, end func(context.Context) error) {
		t.Helper()
		if applied {
			p.mute.Store(true)
		} else {
			p.cut.Store(true)
		}
		ectx, ecancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := end(ectx)
		ecancel()
		time.Sleep(100 * time.Millisecond) // the request reached the server
		p.heal()
		// Back on the session before the next call.
		for deadline := time.Now().Add(ttl); ; time.Sleep(10 * time.Millisecond) {
			if _, err := probe.Stats(ctx); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the client did not reconnect")
			}
		}
		if err == nil || errors.Is(err, baton.ErrLost) {
			t.Fatalf("an end whose answer was lost: %v, want an error of unknown outcome", err)
		}
	}
	t.Run("AckApplied", func(t *testing.T) {
		q, _, j := claim(t)
		lost(t, true, j.Ack)
		if err := j.Ack(ctx); err != nil {
			t.Fatalf("the Ack again, after one that was applied: %v", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{})
	})
	t.Run("RetryAppliedAndClaimedElsewhere", func(t *testing.T) {
		q, other, j := claim(t)
		lost(t, true, func(ctx context.Context) error { return j.Retry(ctx, 0) })
		j2, err := other.Claim(ctx)
		if err != nil || j2.Attempt() != 2 {
			t.Fatalf("the job put back, claimed by another client: %v, %v", j2, err)
		}
		if err := j.Retry(ctx, 0); err != nil {
			t.Fatalf("the Retry again, after one that was applied: %v", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{InFlight: 1})
		if err := j2.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AckAppliedThenFail", func(t *testing.T) {
		q, _, j := claim(t)
		lost(t, true, j.Ack)
		if err := j.Fail(ctx, "broken"); !errors.Is(err, baton.ErrNotHeld) {
			t.Fatalf("a Fail after an Ack that was applied: %v, want ErrNotHeld", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{})
	})
	t.Run("NotSentThenNodeDeleted", func(t *testing.T) {
		q, _, j := claim(t)
		lost(t, false, j.Ack)
		c := connect(t, []string{a}, 5*time.Second)
		dir := "/" + prefix + "/queue/" + encodeName("jobs"+strings.Repeat("x", n)) + "/c"
		kids, _, err := c.Children(dir)
		if err != nil || len(kids) != 1 {
			t.Fatalf("claim nodes %v (%v), want one", kids, err)
		}
		if err := c.Delete(dir+"/"+kids[0], -1); err != nil {
			t.Fatal(err)
		}
		if err := j.Ack(ctx); !errors.Is(err, baton.ErrLost) {
			t.Fatalf("the Ack of a claim whose node was deleted after an Ack that was not sent: %v, want ErrLost", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{Ready: 1})
	})
}
