package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
	"github.com/batonlock/baton/cluster/lease"
)

func TestQueueServerVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true, "10.6.4-MariaDB": true, "10.5.23-MariaDB-log": false,
		"11.4.2-MariaDB": true, "8.0.36": true, "8.4.0": true, "5.7.44-log": false, "": false,
	} {
		if got := serverSupportsQueues(v); got != want {
			t.Errorf("serverSupportsQueues(%q) = %v, want %v", v, got, want)
		}
	}
}

// queueOn opens a Backend on db (closed with the test) and its queue name.
func queueOn(t *testing.T, db *sql.DB, name string) baton.Queue {
	t.Helper()
	ctx := context.Background()
	b, err := New(ctx, db, lease.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	q, err := b.Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func openDB(t *testing.T, s *server) *sql.DB {
	t.Helper()
	createDB(t, s, "baton")
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton?timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// killWhere KILLs the connections that cond (on the process list) finds,
// and returns how many.
func killWhere(t *testing.T, admin *sql.DB, cond string, args ...any) int {
	t.Helper()
	rows, err := admin.Query(`SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND `+cond, args...)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := admin.Exec(fmt.Sprintf("KILL %d", id)); err != nil {
			t.Fatal(err)
		}
	}
	return len(ids)
}

// TestQueueKilledConnections: a KILL of a claimant's connection leaves its
// claim trusted (the row is the claim, renewed through the pool), given to
// no one else, and its Ack succeeds; a KILL of a sleeping claimant's
// connection leaves it waiting, and a Put still wakes it.
func TestQueueKilledConnections(t *testing.T) {
	s := sharedServer(t)
	admin := s.admin(t)
	name := fmt.Sprint("killed-", time.Now().UnixNano())
	db1 := openDB(t, s)
	db1.SetMaxOpenConns(1) // the claimant's one connection, to KILL
	q1, q2 := queueOn(t, db1, name), queueOn(t, openDB(t, s), name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := q2.Put(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	j, err := q1.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cid int64
	if err := db1.QueryRow(`SELECT CONNECTION_ID()`).Scan(&cid); err != nil {
		t.Fatal(err)
	}
	if n := killWhere(t, admin, `ID = ?`, cid); n != 1 {
		t.Fatalf("killed %d connections", n)
	}
	time.Sleep(3 * time.Second) // past the TTL: renewals went on
	if err := j.Err(); err != nil {
		t.Fatalf("the claim was lost with its connection: %v", err)
	}
	if _, err := q2.TryClaim(ctx); !errors.Is(err, baton.ErrEmpty) {
		t.Fatalf("TryClaim of a job claimed on a killed connection: %v, want ErrEmpty", err)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatalf("Ack after the KILL: %v", err)
	}

	got := make(chan error, 1)
	go func() {
		j, err := q2.Claim(ctx)
		if err == nil {
			err = j.Ack(ctx)
		}
		got <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for killWhere(t, admin, `INFO LIKE '%baton-queue-wait%'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no sleeping claimant found")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now()
	if _, err := q1.Put(ctx, []byte("y")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the claimant whose sleep was killed was not woken")
	}
	// Below the TTL (the sleep's slice): woken by the Put.
	if el := time.Since(t0); el > time.Second {
		t.Errorf("the Put reached the claimant after %v", el)
	}
}

// TestQueueTx: PutTx and AckTx take effect with the caller's commit only;
// an AckTx with a stale token is ErrLost.
func TestQueueTx(t *testing.T) {
	s := sharedServer(t)
	db := openDB(t, s)
	name := fmt.Sprint("tx-", time.Now().UnixNano())
	q := queueOn(t, db, name)
	ctx := context.Background()
	stats := func(want baton.QueueStats) {
		t.Helper()
		if st, err := q.Stats(ctx); err != nil || st != want {
			t.Fatalf("Stats = %+v, %v; want %+v", st, err, want)
		}
	}
	put := func(commit bool) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := PutTx(ctx, tx, DefaultPrefix, name, TxJob{Payload: []byte("p"), Key: "k"}, TxJob{Payload: []byte("q"), Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	put(false)
	stats(baton.QueueStats{})
	put(true)
	stats(baton.QueueStats{Ready: 1, Delayed: 1})
	if _, err := PutTx(ctx, nil, DefaultPrefix, name, TxJob{Payload: []byte("x")}); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("PutTx(nil tx): %v", err)
	}
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ack := func(tok baton.Token, commit bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := AckTx(ctx, tx, DefaultPrefix, name, j.ID(), tok); err != nil {
			return err
		}
		if commit {
			return tx.Commit()
		}
		return tx.Rollback()
	}
	if err := ack(j.Token()+1, true); !errors.Is(err, baton.ErrLost) {
		t.Errorf("AckTx with another token: %v, want ErrLost", err)
	}
	if err := ack(j.Token(), false); err != nil {
		t.Fatal(err)
	}
	stats(baton.QueueStats{InFlight: 1, Delayed: 1})
	if err := ack(j.Token(), true); err != nil {
		t.Fatal(err)
	}
	stats(baton.QueueStats{Delayed: 1})
}

// TestQueueInspector: the Inspector lists a queue with its counts by
// state, its oldest ready job's age and its claims; Remove deletes its
// jobs.
func TestQueueInspector(t *testing.T) {
	s := sharedServer(t)
	b, err := New(context.Background(), openDB(t, s), lease.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	queuecheck.Inspector(t, b, fmt.Sprint("inspect/", time.Now().UnixNano()))
}
