package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// Tests of baton.Queue, run when Caps.Queue is set; a backend without it
// must refuse Backend.Queue with ErrUnsupported. The concurrent tests are
// in queue_load.go, the cross-process and SIGKILL tests in queue_proc.go.

func testQueue(t *testing.T, e *env) {
	if !e.s.Caps.Queue {
		b, ctx, name := e.start(t)
		_, err := b.Queue(ctx, name)
		is(t, "Queue of a backend without queues", err, baton.ErrUnsupported)
		return
	}
	e.run(t, []subtest{
		{"Basics", testQueueBasics, true},
		{"BadInput", testQueueBadInput, true},
		{"Unique", testQueueUnique, true},
		{"Delay", testQueueDelay, true},
		{"Attempts", testQueueAttempts, true},
		{"CloseGivesBack", testQueueCloseGivesBack, true},
		{"LastAttemptLost", testQueueLastAttemptLost, true},
		{"Cancel", testQueueCancel, true},
		{"Hammer", testQueueHammer, true},
		{"ManySleepers", testQueueManySleepers, true},
		{"Observed", testQueueObserved, true},
		{"CrossProcess", testQueueCrossProcess, e.s.Caps.CrossProcess},
		{"KillClaimants", testQueueKillClaimants, e.s.Caps.CrossProcess},
		{"KillProducer", testQueueKillProducer, e.s.Caps.CrossProcess},
	})
}

// openQueue opens a queue handle closed at the end of the test.
func openQueue(t *testing.T, b baton.Backend, ctx context.Context, name string) baton.Queue {
	t.Helper()
	q, err := b.Queue(ctx, name)
	ok(t, "Queue", err)
	t.Cleanup(func() { q.Close() })
	return q
}

func wantStats(t *testing.T, what string, q baton.Queue, want baton.QueueStats) {
	t.Helper()
	s, err := q.Stats(context.Background())
	ok(t, what+": Stats", err)
	if s != want {
		t.Errorf("%s: Stats = %+v, want %+v", what, s, want)
	}
}

// claim claims a job within 10 s and checks its payload.
func claim(t *testing.T, q baton.Queue, want string) *baton.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := q.Claim(ctx)
	ok(t, "Claim of "+want, err)
	if got := string(j.Payload()); got != want {
		t.Errorf("claimed %q, want %q", got, want)
	}
	return j
}

// testQueueBasics: ready jobs are claimed oldest first, by any handle,
// with ids and tokens that increase; Ack removes them.
func testQueueBasics(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	p, c := openQueue(t, b, ctx, name), openQueue(t, b, ctx, name)
	if p.Name() != name || p.MaxPayload() < 1024 {
		t.Errorf("Name %q, MaxPayload %d", p.Name(), p.MaxPayload())
	}
	var ids []baton.JobID
	for i := range 5 {
		id, err := p.Put(ctx, []byte(fmt.Sprint("job ", i)))
		ok(t, "Put", err)
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			t.Errorf("id %d after %d", id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	empty, err := p.Put(ctx, []byte{})
	ok(t, "Put of an empty payload", err)
	wantStats(t, "after 6 Puts", c, baton.QueueStats{Ready: 6})
	var last baton.Token
	for i := range 2 {
		j := claim(t, c, fmt.Sprint("job ", i))
		if j.ID() != ids[i] || j.Attempt() != 1 || j.MaxAttempts() != baton.DefaultMaxAttempts || j.Token() <= last || j.Err() != nil {
			t.Errorf("job %d: id %d attempt %d/%d token %d (after %d), err %v", i, j.ID(), j.Attempt(), j.MaxAttempts(), j.Token(), last, j.Err())
		}
		last = j.Token()
		ok(t, "Ack", j.Ack(ctx))
		is(t, "second Ack", j.Ack(ctx), baton.ErrNotHeld)
	}
	js, err := c.ClaimBatch(ctx, 3)
	ok(t, "ClaimBatch", err)
	if len(js) != 3 {
		t.Fatalf("ClaimBatch(3) claimed %d", len(js))
	}
	for k, j := range js {
		if j.ID() != ids[2+k] || j.Token() <= last {
			t.Errorf("batch job %d: id %d token %d", k, j.ID(), j.Token())
		}
		last = j.Token()
	}
	wantStats(t, "3 claimed", p, baton.QueueStats{Ready: 1, InFlight: 3})
	for _, j := range js {
		ok(t, "Ack", j.Ack(ctx))
	}
	j, err := p.TryClaim(ctx)
	ok(t, "TryClaim", err)
	if j.ID() != empty || j.Payload() == nil || len(j.Payload()) != 0 {
		t.Errorf("TryClaim: id %d payload %q, want %d and an empty payload", j.ID(), j.Payload(), empty)
	}
	ok(t, "Ack", j.Ack(ctx))
	_, err = p.TryClaim(ctx)
	is(t, "TryClaim of an empty queue", err, baton.ErrEmpty)
	wantStats(t, "all acked", c, baton.QueueStats{})
}

// testQueueBadInput: every refused call changes nothing.
func testQueueBadInput(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	unchanged := e.sameObjects(t)
	for _, n := range []string{"", "a//b", "../x", "a\x00b", strings.Repeat("x", 10240)} {
		_, err := b.Queue(ctx, n)
		is(t, fmt.Sprintf("Queue(%.20q)", n), err, baton.ErrInvalidName)
	}
	var nilCtx context.Context
	_, err := b.Queue(nilCtx, name)
	is(t, "Queue(nil ctx)", err, baton.ErrInvalidArgument)
	unchanged()
	q := openQueue(t, b, ctx, name)
	big := make([]byte, q.MaxPayload()+1)
	bad := []struct {
		what    string
		payload []byte
		opts    []baton.PutOption
	}{
		{"nil payload", nil, nil},
		{"payload over MaxPayload", big, nil},
		{"negative delay", []byte("x"), []baton.PutOption{baton.Delay(-time.Second)}},
		{"Delay and ReadyAt", []byte("x"), []baton.PutOption{baton.Delay(time.Second), baton.ReadyAt(time.Now())}},
		{"zero ReadyAt", []byte("x"), []baton.PutOption{baton.ReadyAt(time.Time{})}},
		{"a delay past the year 2200", []byte("x"), []baton.PutOption{baton.Delay(1<<63 - 1)}},
		{"ReadyAt past the year 2200", []byte("x"), []baton.PutOption{baton.ReadyAt(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))}},
		{"zero attempts", []byte("x"), []baton.PutOption{baton.MaxAttempts(0)}},
		{"negative attempts", []byte("x"), []baton.PutOption{baton.MaxAttempts(-3)}},
		{"too many attempts", []byte("x"), []baton.PutOption{baton.MaxAttempts(baton.MaxJobAttempts + 1)}},
		{"empty key", []byte("x"), []baton.PutOption{baton.UniqueKey("")}},
		{"long key", []byte("x"), []baton.PutOption{baton.UniqueKey(strings.Repeat("k", baton.MaxJobKeyLen+1))}},
		{"zero option", []byte("x"), []baton.PutOption{{}}},
	}
	for _, c := range bad {
		_, err := q.Put(ctx, c.payload, c.opts...)
		is(t, "Put with "+c.what, err, baton.ErrInvalidArgument)
		// One bad job spoils its batch: the good one is not added either.
		_, err = q.PutBatch(ctx, []baton.JobSpec{{Payload: []byte("good")}, {Payload: c.payload, Options: c.opts}})
		is(t, "PutBatch with "+c.what, err, baton.ErrInvalidArgument)
	}
	_, err = q.PutBatch(ctx, make([]baton.JobSpec, baton.MaxBatch+1))
	is(t, "PutBatch over MaxBatch", err, baton.ErrInvalidArgument)
	_, err = q.Put(nilCtx, []byte("x"))
	is(t, "Put(nil ctx)", err, baton.ErrInvalidArgument)
	for _, n := range []int{0, -1, baton.MaxBatch + 1} {
		_, err = q.ClaimBatch(ctx, n)
		is(t, fmt.Sprintf("ClaimBatch(%d)", n), err, baton.ErrInvalidArgument)
	}
	_, err = q.Dead(ctx, 0)
	is(t, "Dead(0)", err, baton.ErrInvalidArgument)
	_, err = q.Requeue(ctx)
	is(t, "Requeue()", err, baton.ErrInvalidArgument)
	_, err = q.Purge(ctx)
	is(t, "Purge()", err, baton.ErrInvalidArgument)
	_, err = q.Claim(nilCtx)
	is(t, "Claim(nil ctx)", err, baton.ErrInvalidArgument)
	wantStats(t, "after refused calls", q, baton.QueueStats{})
	// A Retry refused leaves the claim held.
	_, err = q.Put(ctx, []byte("x"))
	ok(t, "Put", err)
	j := claim(t, q, "x")
	is(t, "Retry(-1s)", j.Retry(ctx, -time.Second), baton.ErrInvalidArgument)
	is(t, "Retry(max duration)", j.Retry(ctx, 1<<63-1), baton.ErrInvalidArgument)
	wantStats(t, "after a refused Retry", q, baton.QueueStats{InFlight: 1})
	ok(t, "Ack after a refused Retry", j.Ack(ctx))
	var be *baton.Error
	if _, err := q.Put(ctx, nil); !errors.As(err, &be) || be.Kind != baton.KindQueue || be.Name != name || be.Op != "put" {
		t.Errorf("error %v is not a *baton.Error of queue %q, op put", err, name)
	}
}

// testQueueUnique: a Put whose key is pending or in flight returns the
// pending job and adds nothing; once acked, the key is free.
func testQueueUnique(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	k := baton.UniqueKey("report/2026-12")
	id1, err := q.Put(ctx, []byte("first"), k)
	ok(t, "Put", err)
	id2, err := q.Put(ctx, []byte("second"), k, baton.Delay(time.Hour))
	ok(t, "Put again", err)
	if id2 != id1 {
		t.Errorf("a pending key gave id %d, want %d", id2, id1)
	}
	wantStats(t, "a key put twice", q, baton.QueueStats{Ready: 1})
	j := claim(t, q, "first")
	id3, err := q.Put(ctx, []byte("third"), k)
	ok(t, "Put while in flight", err)
	if id3 != id1 {
		t.Errorf("a key in flight gave id %d, want %d", id3, id1)
	}
	wantStats(t, "key in flight", q, baton.QueueStats{InFlight: 1})
	ok(t, "Ack", j.Ack(ctx))
	ids, err := q.PutBatch(ctx, []baton.JobSpec{
		{Payload: []byte("a"), Options: []baton.PutOption{k}},
		{Payload: []byte("b")},
		{Payload: []byte("c"), Options: []baton.PutOption{k}},
	})
	ok(t, "PutBatch", err)
	if len(ids) != 3 || ids[0] == id1 || ids[2] != ids[0] || ids[1] == ids[0] {
		t.Errorf("PutBatch ids %v: want a new id for the key, shared by its two jobs", ids)
	}
	wantStats(t, "after the batch", q, baton.QueueStats{Ready: 2})
}

// testQueueDelay: a delayed job wakes a claimant blocked before it was put,
// at its time; ReadyAt in the past is ready at once; Retry delays.
func testQueueDelay(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	p, c := openQueue(t, b, ctx, name), openQueue(t, b, ctx, name)
	// late bounds the lateness of a wake-up on a loaded machine (CI with
	// -race); a claimant that polled would be late by its period.
	const d, late = 300 * time.Millisecond, time.Second
	got := make(chan *baton.Job, 1)
	go func() {
		j, err := c.Claim(ctx)
		if err != nil {
			t.Errorf("Claim: %v", err)
		}
		got <- j
	}()
	time.Sleep(20 * time.Millisecond)
	t0 := time.Now()
	_, err := p.Put(ctx, []byte("later"), baton.Delay(d))
	ok(t, "Put with a delay", err)
	wantStats(t, "delayed", p, baton.QueueStats{Delayed: 1})
	_, err = p.Put(ctx, []byte("past"), baton.ReadyAt(time.Now().Add(-time.Hour)))
	ok(t, "Put ready in the past", err)
	j := <-got
	if j == nil || string(j.Payload()) != "past" {
		t.Fatalf("the blocked claimant got %v, want the job ready at once", j)
	}
	ok(t, "Ack", j.Ack(ctx))
	j = claim(t, c, "later")
	el := time.Since(t0)
	if el < d-5*time.Millisecond || el > d+late {
		t.Errorf("a job delayed %v was claimed after %v", d, el)
	}
	t.Logf("a job delayed %v was claimed after %v", d, el)
	t0 = time.Now()
	ok(t, "Retry", j.Retry(ctx, d))
	wantStats(t, "retried with a delay", p, baton.QueueStats{Delayed: 1})
	j = claim(t, c, "later")
	if el := time.Since(t0); el < d-5*time.Millisecond || el > d+late {
		t.Errorf("a job retried after %v was claimed after %v", d, el)
	}
	if j.Attempt() != 2 {
		t.Errorf("attempt %d after a Retry, want 2", j.Attempt())
	}
	ok(t, "Ack", j.Ack(ctx))
}

// testQueueAttempts: Fail retries until the last attempt, then the job is
// a dead letter with the reason; Requeue and Purge.
func testQueueAttempts(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	id, err := q.Put(ctx, []byte("flaky"), baton.MaxAttempts(2))
	ok(t, "Put", err)
	j := claim(t, q, "flaky")
	ok(t, "Fail", j.Fail(ctx, "first"))
	wantStats(t, "failed once", q, baton.QueueStats{Ready: 1})
	j = claim(t, q, "flaky")
	if j.Attempt() != 2 || j.MaxAttempts() != 2 {
		t.Errorf("attempt %d of %d", j.Attempt(), j.MaxAttempts())
	}
	long := strings.Repeat("é", baton.MaxReasonLen)
	ok(t, "Fail", j.Fail(ctx, long))
	is(t, "Ack after Fail", j.Ack(ctx), baton.ErrNotHeld)
	wantStats(t, "failed twice", q, baton.QueueStats{Dead: 1})
	ds, err := q.Dead(ctx, 10)
	ok(t, "Dead", err)
	if len(ds) != 1 || ds[0].ID != id || string(ds[0].Payload) != "flaky" || ds[0].Attempts != 2 ||
		len(ds[0].Reason) > baton.MaxReasonLen || !strings.HasPrefix(long, ds[0].Reason) || len(ds[0].Reason) < baton.MaxReasonLen-2 || ds[0].At.IsZero() {
		t.Fatalf("Dead = %+v", ds)
	}
	n, err := q.Requeue(ctx, id, id+1000)
	ok(t, "Requeue", err)
	if n != 1 {
		t.Errorf("Requeue requeued %d", n)
	}
	j = claim(t, q, "flaky")
	if j.Attempt() != 1 || j.ID() != id {
		t.Errorf("requeued job: id %d attempt %d", j.ID(), j.Attempt())
	}
	ok(t, "Fail", j.Fail(ctx, "again"))
	j = claim(t, q, "flaky")
	ok(t, "Retry of the last attempt", j.Retry(ctx, 0))
	wantStats(t, "dead again", q, baton.QueueStats{Dead: 1})
	n, err = q.Purge(ctx, id)
	ok(t, "Purge", err)
	if n != 1 {
		t.Errorf("Purge purged %d", n)
	}
	wantStats(t, "purged", q, baton.QueueStats{})
	if ds, err := q.Dead(ctx, 10); err != nil || len(ds) != 0 {
		t.Errorf("Dead after Purge = %v, %v", ds, err)
	}
}

// testQueueCloseGivesBack: Close of a claimant's handle loses its claims
// (Ack then returns ErrLost) and gives the jobs back first in line.
func testQueueCloseGivesBack(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	c, err := b.Queue(ctx, name)
	ok(t, "Queue", err)
	for _, s := range []string{"one", "two"} {
		_, err := q.Put(ctx, []byte(s))
		ok(t, "Put", err)
	}
	j := claim(t, c, "one")
	jctx, cancel := j.Context(ctx)
	defer cancel()
	ok(t, "Close", c.Close())
	select {
	case <-j.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost did not fire at Close")
	}
	is(t, "Err after Close", j.Err(), baton.ErrLost)
	is(t, "Context after Close", context.Cause(jctx), baton.ErrLost)
	is(t, "Ack after Close", j.Ack(ctx), baton.ErrLost)
	is(t, "Retry after Close", j.Retry(ctx, 0), baton.ErrLost)
	is(t, "Fail after Close", j.Fail(ctx, "x"), baton.ErrLost)
	wantStats(t, "after a lost claim's Ack, Retry and Fail", q, baton.QueueStats{Ready: 2})
	j2 := claim(t, q, "one")
	if j2.ID() != j.ID() || j2.Attempt() != 2 || j2.Token() <= j.Token() {
		t.Errorf("given back: id %d attempt %d token %d; first claim id %d token %d", j2.ID(), j2.Attempt(), j2.Token(), j.ID(), j.Token())
	}
	ok(t, "Ack", j2.Ack(ctx))
	_, err = c.Claim(ctx)
	is(t, "Claim after Close", err, baton.ErrClosed)
}

// testQueueLastAttemptLost: a job whose claim is lost on its last
// attempt is not claimed again but becomes a dead letter, with a reason.
func testQueueLastAttemptLost(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	c, err := b.Queue(ctx, name)
	ok(t, "Queue", err)
	id, err := q.Put(ctx, []byte("once"), baton.MaxAttempts(1))
	ok(t, "Put", err)
	_, err = q.Put(ctx, []byte("next"))
	ok(t, "Put", err)
	claim(t, c, "once")
	ok(t, "Close", c.Close())
	j := claim(t, q, "next")
	ok(t, "Ack", j.Ack(ctx))
	_, err = q.TryClaim(ctx)
	is(t, "TryClaim", err, baton.ErrEmpty)
	wantStats(t, "lost on its last attempt", q, baton.QueueStats{Dead: 1})
	ds, err := q.Dead(ctx, 10)
	ok(t, "Dead", err)
	if len(ds) != 1 || ds[0].ID != id || string(ds[0].Payload) != "once" || ds[0].Attempts != 1 || ds[0].Reason == "" {
		t.Fatalf("Dead = %+v", ds)
	}
}

// testQueueCancel: a blocked Claim that is cancelled, or whose handle is
// closed, returns promptly and claims nothing.
func testQueueCancel(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	q := openQueue(t, b, ctx, name)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := q.Claim(cctx); done <- err }()
	time.Sleep(30 * time.Millisecond)
	t0 := time.Now()
	cancel()
	err := result(t, done, 5*time.Second, "a cancelled Claim did not return")
	is(t, "cancelled Claim", err, context.Canceled)
	if el := time.Since(t0); el > e.s.Caps.CancelBound {
		t.Errorf("a cancelled Claim returned after %v", el)
	}
	_, err = q.Put(ctx, []byte("x"))
	ok(t, "Put", err)
	wantStats(t, "after a cancelled Claim", q, baton.QueueStats{Ready: 1})
	ok(t, "Ack", claim(t, q, "x").Ack(ctx))
	// A context that cannot end by itself takes another way to Close.
	type key struct{}
	for _, cctx := range []context.Context{ctx, context.Background(), context.WithValue(context.Background(), key{}, 1)} {
		c, err := b.Queue(ctx, name)
		ok(t, "Queue", err)
		go func() { _, err := c.Claim(cctx); done <- err }()
		time.Sleep(30 * time.Millisecond)
		ok(t, "Close", c.Close())
		err = result(t, done, 5*time.Second, "Close did not end a blocked Claim")
		is(t, "Claim ended by Close", err, baton.ErrClosed)
	}
	wantStats(t, "after Claims ended by Close", q, baton.QueueStats{})
}
