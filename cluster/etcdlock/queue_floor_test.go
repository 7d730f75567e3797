package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/batonlock/baton"
)

// floorTimes sets floorSlack and fullEvery for a test (no claim of
// another test runs meanwhile: the subtests of TestQueue run one by one).
func floorTimes(t *testing.T, slack, every time.Duration) {
	s, e := floorSlack, fullEvery
	floorSlack, fullEvery = int64(slack), every
	t.Cleanup(func() { floorSlack, fullEvery = s, e })
}

// readsBackend opens a backend whose client records the ranges that its
// transactions read.
func readsBackend(t *testing.T, c *cluster, prefix string) (baton.Backend, func() [][2]string) {
	t.Helper()
	var mu sync.Mutex
	var ranges [][2]string
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if tr, ok := req.(*etcdserverpb.TxnRequest); ok {
			mu.Lock()
			for _, op := range tr.Success {
				if r := op.GetRequestRange(); r != nil {
					ranges = append(ranges, [2]string{string(r.Key), string(r.RangeEnd)})
				}
			}
			mu.Unlock()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	b := interceptedBackend(t, c, prefix, record)
	take := func() [][2]string {
		mu.Lock()
		defer mu.Unlock()
		rs := ranges
		ranges = nil
		return rs
	}
	return b, take
}

// testQueueReadsSkipEnded: once jobs are done, the claims' reads neither
// start below the records of the jobs done (which etcd's index keeps until
// a compaction, and a range walks) nor range over the claim keys: they
// start at the floor and get claims by key.
func testQueueReadsSkipEnded(t *testing.T, c *cluster) {
	floorTimes(t, 20*time.Millisecond, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, reads := readsBackend(t, c, "qfloor/")
	q := must(b.Queue(ctx, "jobs")).get(t)
	put := func(n int) []baton.JobID {
		t.Helper()
		specs := make([]baton.JobSpec, n)
		for i := range specs {
			specs[i] = baton.JobSpec{Payload: []byte("job")}
		}
		return must(q.PutBatch(ctx, specs)).get(t)
	}
	ack := func(n int) {
		t.Helper()
		for range n {
			if err := must(q.TryClaim(ctx)).get(t).Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	drain := func(n int) { put(n); ack(n) }
	drain(200)
	time.Sleep(50 * time.Millisecond) // past the slack
	if rs := reads(); len(rs) == 0 {
		t.Fatal("no read recorded")
	}
	drain(100)
	check := func(from string) {
		t.Helper()
		for _, r := range reads() {
			switch {
			case strings.HasSuffix(r[0], "/c/") && r[1] != "":
				t.Errorf("a claim read every claim key: [%s, %s)", r[0], r[1])
			case (strings.HasSuffix(r[0], "/j/") || strings.HasSuffix(r[0], "/r/")) && r[1] != "":
				t.Errorf("a claim read the records from the first: [%s, %s)", r[0], r[1])
			case strings.Contains(r[0], "/c/") && r[1] != "" && r[0][strings.Index(r[0], "/c/"):] < from:
				t.Errorf("a claim read the claim keys from %s, below %s", r[0], from)
			}
		}
	}
	check("")

	// A job given back keeps its older id: its claim is read by key, not
	// by a range from its id over the claims of the jobs done since.
	put(200)
	j := must(q.TryClaim(ctx)).get(t)
	if err := j.Retry(ctx, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the next jobs are ready after it
	later := put(100)
	ack(199)
	// The job given back is held, and stays first among the records read.
	held := must(q.TryClaim(ctx)).get(t)
	defer held.Ack(ctx)
	reads()
	ack(100)
	check(fmt.Sprintf("/c/%016x", uint64(later[0])))
}

// testQueueBelowFloor: a job whose record is below the floor (its
// producer's clock behind the claimants') is still claimed: by a claimant
// waiting on the queue, which sees it put; by one that does not wait, once
// fullEvery has passed; by one that waits after a read that missed it,
// whose watch starts at the last read from the first record.
func testQueueBelowFloor(t *testing.T, c *cluster) {
	floorTimes(t, 20*time.Millisecond, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, d := fast(t, c, "qbelow/")
	q := must(b.Queue(ctx, "jobs")).get(t)
	raw := d.c
	dir := d.dir(baton.KindQueue, "jobs")
	// A job put an hour in the past, as by a producer whose clock is
	// that far behind.
	putBehind := func(p string) {
		t.Helper()
		at := time.Now().Add(-time.Hour).UnixNano()
		rec := qjob{max: 5, payload: []byte(p)}
		k := fmt.Sprintf("%sj/%016x/%016x-%03x", dir, at, uint64(time.Now().UnixNano()), 0)
		if _, err := raw.Put(ctx, k, string(rec.encode())); err != nil {
			t.Fatal(err)
		}
	}
	cycle := func() {
		t.Helper()
		if _, err := q.Put(ctx, []byte("now")); err != nil {
			t.Fatal(err)
		}
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	time.Sleep(50 * time.Millisecond)
	cycle() // the floor is now past the first job

	got := make(chan string, 1)
	go func() {
		j, err := q.Claim(ctx)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(j.Payload())
		_ = j.Ack(ctx)
	}()
	time.Sleep(100 * time.Millisecond) // the claimant waits
	putBehind("behind, seen")
	select {
	case p := <-got:
		if p != "behind, seen" {
			t.Fatalf("waiting claimant got %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting claimant did not claim a job put below the floor")
	}

	cycle()
	putBehind("behind, unseen")
	if _, err := q.TryClaim(ctx); !errors.Is(err, baton.ErrEmpty) {
		t.Logf("TryClaim right after: %v", err) // found at once: no harm
	}
	fullEvery = 100 * time.Millisecond
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := q.TryClaim(ctx)
		if err == nil {
			if p := string(j.Payload()); p != "behind, unseen" {
				t.Fatalf("claimed %q", p)
			}
			if err := j.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, baton.ErrEmpty) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a job below the floor was never claimed by TryClaim")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Put before a claimant's read that missed it, then nothing else:
	// the claimant's watch, from the last read from the first record,
	// sees it.
	fullEvery = time.Hour
	if _, err := q.TryClaim(ctx); !errors.Is(err, baton.ErrEmpty) {
		t.Fatalf("TryClaim of an empty queue: %v", err)
	}
	cycle()
	putBehind("behind, before the wait")
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	j, err := q.Claim(wctx)
	if err != nil {
		t.Fatalf("a job below the floor put before the claimant's read: %v", err)
	}
	if p := string(j.Payload()); p != "behind, before the wait" {
		t.Fatalf("claimed %q", p)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
