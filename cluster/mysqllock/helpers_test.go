package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

func TestLockRow(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	openT(t, s.url(testQuery)) // creates the tables
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := testName(t)
	var last baton.Token
	for _, commit := range []bool{true, false} {
		tx1, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t1, err := LockRow(ctx, tx1, name)
		if err != nil {
			t.Fatal(err)
		}
		if t1 <= last && commit {
			t.Fatalf("token %d after %d", t1, last)
		}
		got := make(chan baton.Token, 1)
		go func() {
			tx2, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Error(err)
				got <- 0
				return
			}
			defer tx2.Rollback()
			t2, err := LockRow(ctx, tx2, name)
			if err != nil {
				t.Error(err)
			}
			got <- t2
			tx2.Commit()
		}()
		select {
		case <-got:
			t.Fatal("a second transaction locked the row while the first held it")
		case <-time.After(200 * time.Millisecond):
		}
		if commit {
			err = tx1.Commit()
		} else {
			err = tx1.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case t2 := <-got:
			if commit && t2 <= t1 {
				t.Fatalf("token %d after %d", t2, t1)
			}
			last = t2
		case <-time.After(5 * time.Second):
			t.Fatalf("the row stayed locked after the transaction ended (commit %v)", commit)
		}
	}
	if _, err := LockRow(ctx, nil, name); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Fatalf("nil transaction: %v", err)
	}
}

func TestFencedUpdate(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	ctx := context.Background()
	db := s.admin(t)
	for _, q := range []string{"USE baton", "DROP TABLE IF EXISTS fenced_res",
		"CREATE TABLE fenced_res (id INT PRIMARY KEY, v VARCHAR(20), fence BIGINT UNSIGNED NOT NULL DEFAULT 0)",
		"INSERT INTO fenced_res (id, v) VALUES (1, 'none')"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.Conn(ctx) // USE holds per connection
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "USE baton"); err != nil {
		t.Fatal(err)
	}
	write := func(tok baton.Token, v string) error {
		_, err := FencedUpdate(ctx, conn, "fenced_res", "v = ?", "id = ?", tok, v, 1)
		return err
	}
	for _, step := range []struct {
		tok   baton.Token
		v     string
		stale bool
	}{{5, "a", false}, {5, "a2", false}, {3, "old", true}, {7, "b", false}, {6, "c", true}} {
		err := write(step.tok, step.v)
		if step.stale != errors.Is(err, baton.ErrLost) || (!step.stale && err != nil) {
			t.Fatalf("write %q with token %d: %v (stale: %v)", step.v, step.tok, err, step.stale)
		}
	}
	var v string
	var fence uint64
	if err := conn.QueryRowContext(ctx, "SELECT v, fence FROM fenced_res WHERE id = 1").Scan(&v, &fence); err != nil {
		t.Fatal(err)
	}
	if v != "b" || fence != 7 {
		t.Fatalf("row v=%q fence=%d, want b and 7", v, fence)
	}
	if countPlaceholders("a = '?', b = ?, `c?` = ?") != 2 {
		t.Fatal("placeholders inside quotes counted")
	}
}
