package pglock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
	"github.com/batonlock/baton/cluster/lease"
)

func openQueueT(t *testing.T, name string) (baton.Backend, baton.Queue) {
	t.Helper()
	return openQueueTTL(t, name, 2*time.Second)
}

// openQueueTTL opens a Backend with leases of ttl and a queue handle on
// it, closed at the end of the test.
func openQueueTTL(t *testing.T, name string, ttl time.Duration) (baton.Backend, baton.Queue) {
	t.Helper()
	ctx := context.Background()
	b, err := OpenURL(ctx, need(t), lease.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	q, err := b.Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return b, q
}

func wantQueueStats(t *testing.T, what string, q baton.Queue, want baton.QueueStats) {
	t.Helper()
	s, err := q.Stats(context.Background())
	if err != nil || s != want {
		t.Fatalf("%s: Stats = %+v, %v; want %+v", what, s, err, want)
	}
}

// TestQueuePutTx: a job put in a transaction that rolls back is not there;
// one put in a transaction that commits is, with the row written beside
// it, and a claimant blocked meanwhile is woken at the commit.
func TestQueuePutTx(t *testing.T) {
	name := fmt.Sprint("puttx-", time.Now().UnixNano())
	_, q := openQueueT(t, name)
	ctx := context.Background()
	pool := poolT(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS test_orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PutTx(ctx, tx, name, []byte("rolled back")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantQueueStats(t, "after a rollback", q, baton.QueueStats{})
	if _, err := PutTx(ctx, nil, "", []byte("x")); !errors.Is(err, baton.ErrInvalidName) {
		t.Fatalf("PutTx with no name: %v", err)
	}
	got := make(chan *baton.Job, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		j, err := q.Claim(cctx)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO test_orders VALUES ($1)`, name); err != nil {
			return err
		}
		if _, err := PutTx(ctx, tx, name, nil); !errors.Is(err, baton.ErrInvalidArgument) {
			return fmt.Errorf("PutTx of a nil payload: %v", err)
		}
		_, err := PutTx(ctx, tx, name, []byte(name), baton.UniqueKey("order"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	j := <-got
	if j == nil || string(j.Payload()) != name {
		t.Fatalf("claimed %v", j)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	// database/sql, through the pgx driver.
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	for _, commit := range []bool{false, true} {
		stx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := PutSQLTx(ctx, stx, name, []byte("sql"), baton.Delay(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = stx.Commit()
		} else {
			err = stx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	wantQueueStats(t, "after a database/sql rollback and commit", q, baton.QueueStats{Delayed: 1})
}

// TestQueueAckTx: an Ack in a transaction that rolls back leaves the claim
// held (and acked again later); one that commits removes the job with the
// effect written beside it, and the claim is not reported lost after.
func TestQueueAckTx(t *testing.T) {
	name := fmt.Sprint("acktx-", time.Now().UnixNano())
	_, q := openQueueT(t, name)
	ctx := context.Background()
	pool := poolT(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS test_effects (job bigint PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b"} {
		if _, err := q.Put(ctx, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	effect := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO test_effects VALUES ($1)`, int64(j.ID()))
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := effect(tx); err != nil {
		t.Fatal(err)
	}
	if err := AckTx(ctx, tx, j); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantQueueStats(t, "after a rolled-back AckTx", q, baton.QueueStats{Ready: 1, InFlight: 1})
	// Past a renewal: the claim is still held.
	time.Sleep(1500 * time.Millisecond)
	if j.Err() != nil {
		t.Fatalf("claim lost after a rolled-back AckTx: %v", j.Err())
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := effect(tx); err != nil {
			return err
		}
		return AckTx(ctx, tx, j)
	}); err != nil {
		t.Fatal(err)
	}
	wantQueueStats(t, "after a committed AckTx", q, baton.QueueStats{Ready: 1})
	time.Sleep(1500 * time.Millisecond)
	if j.Err() != nil {
		t.Fatalf("claim reported lost after its AckTx committed: %v", j.Err())
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM test_effects WHERE job = $1`, int64(j.ID())).Scan(&n); err != nil || n != 1 {
		t.Fatalf("effects of the job: %d %v", n, err)
	}
	// A second AckTx of the same claim: lost, and nothing changes.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return AckTx(ctx, tx, j) }); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("AckTx of an acked job: %v, want ErrLost", err)
	}
	// database/sql.
	j2, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	for _, commit := range []bool{false, true} {
		stx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := AckSQLTx(ctx, stx, j2); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = stx.Commit()
		} else {
			err = stx.Rollback()
			wantQueueStats(t, "after a rolled-back AckSQLTx", q, baton.QueueStats{InFlight: 1})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	wantQueueStats(t, "after a committed AckSQLTx", q, baton.QueueStats{})
}

// TestQueueClaimantTerminated: pg_terminate_backend of a claimant's
// session loses its claim (Lost fires) before the job is given to another
// claimant, which gets it with a greater token once the lease passed.
func TestQueueClaimantTerminated(t *testing.T) {
	name := fmt.Sprint("terminated-", time.Now().UnixNano())
	_, q1 := openQueueT(t, name)
	_, q2 := openQueueT(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := q2.Put(ctx, []byte("job")); err != nil {
		t.Fatal(err)
	}
	j1, err := q1.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	actx, c := adminConn(t)
	var ended bool
	if err := c.QueryRow(actx, `SELECT pg_terminate_backend(claimant, 5000) FROM baton_jobs WHERE id = $1`, int64(j1.ID())).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminating the claimant session: %v %v", ended, err)
	}
	terminated := time.Now()
	got := make(chan *baton.Job, 1)
	go func() {
		j, err := q2.Claim(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	select {
	case <-j1.Lost():
	case j2 := <-got:
		t.Fatalf("job given to another claimant (token %d) before the terminated claim was lost", j2.Token())
	}
	lost := time.Since(terminated)
	j2 := <-got
	if j2 == nil {
		return
	}
	t.Logf("claim lost %v after its session was terminated; claimed again %v after", lost, time.Since(terminated))
	if j2.ID() != j1.ID() || j2.Token() <= j1.Token() || j2.Attempt() != 2 {
		t.Fatalf("claimed again: id %d token %d attempt %d; first id %d token %d", j2.ID(), j2.Token(), j2.Attempt(), j1.ID(), j1.Token())
	}
	if err := j1.Ack(ctx); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("Ack of the lost claim: %v", err)
	}
	if err := j2.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	// The handle takes a new session for its next claims.
	if _, err := q2.Put(ctx, []byte("next")); err != nil {
		t.Fatal(err)
	}
	j3, err := q1.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past a renewal
	if j3.Err() != nil {
		t.Fatalf("claim on the new session: %v", j3.Err())
	}
	if err := j3.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestQueueInspect: a queue with jobs is listed and inspected (claims as
// holders with their session, counts in Detail) and removed, which loses
// its claims and keeps its token row.
func TestQueueInspect(t *testing.T) {
	name := fmt.Sprint("inspected-", time.Now().UnixNano())
	b, q := openQueueT(t, name)
	ctx := context.Background()
	for _, p := range []string{"a", "b"} {
		if _, err := q.Put(ctx, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in := b.(baton.Inspector)
	info, err := in.Inspect(ctx, baton.KindQueue, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || info.Holders[0].Token != j.Token() || info.Holders[0].TTL <= 0 ||
		!strings.Contains(info.Holders[0].Owner, "session ") || info.LastToken != j.Token() ||
		!strings.HasPrefix(info.Detail, "ready 1, delayed 0, in flight 1, dead 0, oldest ready ") {
		t.Fatalf("Inspect = %+v", info)
	}
	all, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(all, func(i baton.Info) bool { return i.Kind == baton.KindQueue && i.Name == name }) {
		t.Fatalf("List has no queue %q", name)
	}
	if err := in.Remove(ctx, baton.KindQueue, name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-j.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the claim of a removed queue was not lost")
	}
	if _, err := q.Put(ctx, []byte("c")); err != nil {
		t.Fatal(err)
	}
	j2, err := q.TryClaim(ctx)
	if err != nil || j2.Token() <= j.Token() {
		t.Fatalf("claim after Remove: %v %v", j2, err)
	}
	if err := in.Remove(ctx, baton.KindQueue, "never-opened"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove of an unknown queue: %v", err)
	}
	// The check every network backend runs: counts by state and the
	// oldest ready job's age.
	queuecheck.Inspector(t, b, fmt.Sprint("checked-", time.Now().UnixNano()))
}
