package pglock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
)

// TestQueueClaimHeadSkipsEnded: after many jobs were claimed and acked, a
// claim that reads from where the last one stopped touches a few pages,
// where one that reads from the first walks the index entries of every
// row version ended since the table was last vacuumed, and reads the row
// of each that a snapshot may still see. A transaction kept open holds
// such a snapshot, as a busy server's other statements do.
func TestQueueClaimHeadSkipsEnded(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprint("head-ended-", time.Now().UnixNano())
	_, q := openQueueT(t, name)
	old, err := pgx.Connect(ctx, need(t))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	if _, err := old.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM baton_queues`); err != nil {
		t.Fatal(err)
	}
	specs := make([]baton.JobSpec, 500)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: []byte("job")}
	}
	for range 4 {
		if _, err := q.PutBatch(ctx, specs); err != nil {
			t.Fatal(err)
		}
	}
	for range 1500 {
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c, err := pgx.Connect(ctx, need(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var ready time.Time
	var id int64
	if err := c.QueryRow(ctx, `SELECT ready_at, id FROM baton_jobs WHERE queue = $1 AND state = 0 ORDER BY ready_at, id LIMIT 1`, name).Scan(&ready, &id); err != nil {
		t.Fatal(err)
	}
	// pages sums the pages the claim's scan of the ready jobs touches.
	pages := func(ready time.Time, id int64) float64 {
		t.Helper()
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var plan []struct{ Plan planNode }
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+jobsClaimOneSQL, name, 10000, 1, ready, id).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		sum, scans := 0.0, 0
		var walk func(n planNode)
		walk = func(n planNode) {
			if n.Index == "baton_jobs_ready" {
				sum += n.Hit + n.Read
				scans++
			}
			for _, k := range n.Plans {
				walk(k)
			}
		}
		walk(plan[0].Plan)
		if scans != 1 {
			t.Fatalf("the claim made %d scans of the ready jobs' index, not 1", scans)
		}
		return sum
	}
	first, head := pages(time.Time{}, 0), pages(ready, id)
	t.Logf("pages of a claim's scan of the ready jobs after 1,500 jobs done: from the first %v, from the head %v", first, head)
	if head > 10 {
		t.Fatalf("a claim from the head touched %v pages", head)
	}
	if first < 5*head {
		t.Fatalf("a claim from the first touched %v pages against %v from the head: the ended rows were not there to skip", first, head)
	}
}

// TestQueueClaimHead: what a Backend's claim head does to the order of
// claims. A job committed behind the head (put in a transaction that
// outlived younger jobs' claims) is passed over while younger jobs are
// claimed, and claimed within claimFullEvery; a job given back by a handle
// of the Backend is claimed next, in its place.
func TestQueueClaimHead(t *testing.T) {
	ctx := context.Background()
	pool := poolT(t)
	t.Run("LateCommit", func(t *testing.T) {
		name := fmt.Sprint("head-late-", time.Now().UnixNano())
		_, q := openQueueT(t, name)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		old, err := PutTx(ctx, tx, name, []byte("old"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"young 1", "young 2"} {
			if _, err := q.Put(ctx, []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		claim := func() *baton.Job {
			t.Helper()
			j, err := q.TryClaim(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			return j
		}
		full := time.Now() // the first claim reads from the first
		if j := claim(); string(j.Payload()) != "young 1" {
			t.Fatalf("first claim %q", j.Payload())
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		j := claim()
		if j.ID() == old && time.Since(full) >= claimFullEvery {
			t.Logf("a read from the first was due before the claim after the commit (%v after the first): the pass-over was not seen", time.Since(full))
			return
		}
		if string(j.Payload()) != "young 2" {
			t.Fatalf("the claim after the commit got %q; want the job past the head, young 2", j.Payload())
		}
		for n := 3; ; n++ {
			if _, err := q.Put(ctx, []byte(fmt.Sprint("young ", n))); err != nil {
				t.Fatal(err)
			}
			j := claim()
			if j.ID() == old {
				break
			}
			if time.Since(committed) > claimFullEvery+5*time.Second {
				t.Fatalf("the job committed behind the head was not claimed in %v", time.Since(committed))
			}
		}
		t.Logf("claimed %v after its commit", time.Since(committed))
	})
	t.Run("GiveBack", func(t *testing.T) {
		name := fmt.Sprint("head-giveback-", time.Now().UnixNano())
		b, h1 := openQueueT(t, name)
		h2, err := b.Queue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer h2.Close()
		first, err := h1.Put(ctx, []byte("1"))
		if err != nil {
			t.Fatal(err)
		}
		if j, err := h1.TryClaim(ctx); err != nil || j.ID() != first {
			t.Fatalf("h1 claimed %v, %v", j, err)
		}
		for _, p := range []string{"2", "3"} {
			if _, err := h1.Put(ctx, []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		if j, err := h2.TryClaim(ctx); err != nil || string(j.Payload()) != "2" {
			t.Fatalf("h2 claimed %v, %v; want 2", j, err)
		}
		if err := h1.Close(); err != nil {
			t.Fatal(err)
		}
		j, err := h2.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if j.ID() != first {
			t.Fatalf("after job 1 was given back, h2 claimed %q; want 1, in its place", j.Payload())
		}
	})
}
