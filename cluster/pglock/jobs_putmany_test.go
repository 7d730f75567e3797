package pglock

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton"
)

// TestQueuePutBatchOneStatement: a batch is put by one statement whose
// ids follow the order given, so that claims take the jobs in that order;
// a job whose key is pending from before, or taken earlier in the batch,
// gets that job's id; payloads and attempts arrive whole.
func TestQueuePutBatchOneStatement(t *testing.T) {
	ctx := context.Background()
	_, q := openQueueT(t, "put-many")
	before, err := q.Put(ctx, []byte("before"), baton.UniqueKey("old"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	specs := make([]baton.JobSpec, n)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: fmt.Appendf(nil, "job %d", i), Options: []baton.PutOption{baton.MaxAttempts(1 + i%7)}}
	}
	specs[10].Options = append(specs[10].Options, baton.UniqueKey("old"))
	specs[20].Options = append(specs[20].Options, baton.UniqueKey("new"))
	specs[30].Options = append(specs[30].Options, baton.UniqueKey("new"))
	ids, err := q.PutBatch(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	if ids[10] != before {
		t.Errorf("job of a key pending from before: id %d, want %d", ids[10], before)
	}
	if ids[30] != ids[20] {
		t.Errorf("second job of a key new in the batch: id %d, want the first's %d", ids[30], ids[20])
	}
	var want []int // places of the jobs put, in order
	for i := range specs {
		if i != 10 && i != 30 {
			want = append(want, i)
		}
	}
	for k := 1; k < len(want); k++ {
		if ids[want[k]] <= ids[want[k-1]] {
			t.Fatalf("ids out of the order given: job %d has %d, job %d has %d", want[k-1], ids[want[k-1]], want[k], ids[want[k]])
		}
	}
	wantQueueStats(t, "after the batch", q, baton.QueueStats{Ready: n - 2 + 1})
	if j, err := q.TryClaim(ctx); err != nil || j.ID() != before {
		t.Fatalf("first claim: %v, %v; want the job put before", j, err)
	} else if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range want {
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatalf("claim of job %d: %v", i, err)
		}
		if j.ID() != ids[i] || string(j.Payload()) != fmt.Sprintf("job %d", i) || j.MaxAttempts() != 1+i%7 {
			t.Fatalf("claimed id %d %q, %d attempts; want job %d: id %d %q, %d attempts", j.ID(), j.Payload(), j.MaxAttempts(), i, ids[i], fmt.Sprintf("job %d", i), 1+i%7)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantQueueStats(t, "drained", q, baton.QueueStats{})
}

// TestPutManyStatementIsOne: the batch's rows go in by one statement (an
// INSERT per job costs a statement's overhead on the server for each).
func TestPutManyStatementIsOne(t *testing.T) {
	ctx := context.Background()
	_, q := openQueueT(t, "put-many-count")
	c, err := pgx.Connect(ctx, need(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// Every statement of the batch's transaction takes a command id; one
	// INSERT per job would take one each.
	specs := make([]baton.JobSpec, 50)
	for i := range specs {
		specs[i].Payload = []byte("x")
	}
	if _, err := q.PutBatch(ctx, specs); err != nil {
		t.Fatal(err)
	}
	var cmins []int64
	rows, err := c.Query(ctx, `SELECT DISTINCT cmin::text::bigint FROM baton_jobs WHERE queue = 'put-many-count'`)
	if err != nil {
		t.Fatal(err)
	}
	cmins, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(cmins) != 1 {
		t.Fatalf("the batch's rows were written by %d statements (command ids %v), want 1", len(cmins), cmins)
	}
}
