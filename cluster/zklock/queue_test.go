package zklock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
)

// TestQueueSessionExpiry: a claimant cut off from the server loses its
// claim (Lost fires) before its session expires and the job is given to a
// claimant blocked on the empty queue, with the next attempt and a greater
// token; the cut-off claimant's Ack then returns ErrLost.
func TestQueueSessionExpiry(t *testing.T) {
	addr := standalone(t)
	p := startProxy(t, addr)
	const ttl = time.Second
	name := fmt.Sprintf("queue-expiry-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cut := open(t, fmt.Sprintf("zk://%s/qexpiry?ttl=%v", p.addr, ttl))
	other := open(t, "zk://"+addr+"/qexpiry?ttl=5s")
	q1, err := cut.Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	q2, err := other.Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q2.Put(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	j1, err := q1.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type claimed struct {
		j       *baton.Job
		lostYet bool
		err     error
	}
	got := make(chan claimed, 1)
	go func() {
		j, err := q2.Claim(ctx)
		got <- claimed{j, err == nil && j1.Err() != nil, err}
	}()
	time.Sleep(100 * time.Millisecond)
	p.cut.Store(true)
	select {
	case <-j1.Lost():
	case <-time.After(5 * ttl):
		t.Fatal("the cut-off claim's Loss did not fire")
	}
	var r claimed
	select {
	case r = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the job of the expired session was not given to the waiting claimant")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.lostYet {
		t.Error("the job was given to another claimant while the cut-off claim was trusted")
	}
	if r.j.ID() != j1.ID() || r.j.Attempt() != 2 || r.j.Token() <= j1.Token() {
		t.Errorf("second claim: id %d attempt %d token %d; first id %d token %d", r.j.ID(), r.j.Attempt(), r.j.Token(), j1.ID(), j1.Token())
	}
	if err := j1.Ack(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Ack of the cut-off claim: %v, want ErrLost", err)
	}
	if err := r.j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := q2.Stats(ctx); err != nil || s != (baton.QueueStats{}) {
		t.Errorf("Stats after the Ack: %+v, %v", s, err)
	}
}

// TestQueueRequestLimit: a batch over what one ZooKeeper request carries
// is refused before anything is written.
func TestQueueRequestLimit(t *testing.T) {
	addr := standalone(t)
	ctx := context.Background()
	b := open(t, "zk://"+addr+"/qlimit")
	q, err := b.Queue(ctx, fmt.Sprint("limit-", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, q.MaxPayload())
	if _, err := q.PutBatch(ctx, []baton.JobSpec{{Payload: big}, {Payload: big}}); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("PutBatch of two payloads of MaxPayload: %v, want ErrInvalidArgument", err)
	}
	if _, err := q.Put(ctx, big); err != nil {
		t.Errorf("Put of MaxPayload bytes: %v", err)
	}
	if s, err := q.Stats(ctx); err != nil || s != (baton.QueueStats{Ready: 1}) {
		t.Errorf("Stats = %+v, %v; want the one job put", s, err)
	}
	j, err := q.TryClaim(ctx)
	if err != nil || len(j.Payload()) != len(big) {
		t.Fatalf("TryClaim: %v", err)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQueueInspector: the Inspector lists a queue with its counts by
// state, its oldest ready job's age and its claims; Remove deletes it.
func TestQueueInspector(t *testing.T) {
	addr := standalone(t)
	b := open(t, fmt.Sprintf("zk://%s/qinspect-%d", addr, time.Now().UnixNano()))
	queuecheck.Inspector(t, b, "a/jobs")
}

// TestQueueLastAttemptHeld: a job held on its last attempt is not made a
// dead letter by another claimant that reads it, whatever that claimant
// knew of the claims (here: it skipped listing them, its last list having
// been empty), and that claimant then finds the queue empty; the holder's
// Ack ends the job.
func TestQueueLastAttemptHeld(t *testing.T) {
	addr := standalone(t)
	name := fmt.Sprintf("queue-last-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holderQ, err := open(t, "zk://"+addr+"/qlast").Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	otherQ, err := open(t, "zk://"+addr+"/qlast").Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The other handle's last list of the claims is empty.
	if _, err := otherQ.Put(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	j0, err := otherQ.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := j0.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := holderQ.Put(ctx, []byte("last"), baton.MaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	held, err := holderQ.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j, err := otherQ.TryClaim(ctx); !errors.Is(err, baton.ErrEmpty) {
		t.Fatalf("TryClaim while the only job is held: %v, %v; want ErrEmpty", j, err)
	}
	if s, err := otherQ.Stats(ctx); err != nil || s != (baton.QueueStats{InFlight: 1}) {
		t.Fatalf("Stats = %+v, %v; want the held job in flight and no dead letter", s, err)
	}
	if err := held.Err(); err != nil {
		t.Fatalf("the held claim: %v", err)
	}
	if err := held.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
