package pglock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonlock/baton"
)

func poolT(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), need(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestLockRow: a second transaction waits for the first one's row lock
// until it commits, and gets a greater token; a rolled-back holder's
// token is given again.
func TestLockRow(t *testing.T) {
	ctx := context.Background()
	pool := poolT(t)
	b, err := New(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Mutex(ctx, "row-schema"); err != nil { // creates the tables
		t.Fatal(err)
	}
	if _, err := LockRow(ctx, nil, "x"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("nil tx: %v", err)
	}
	tx1, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockRow(ctx, tx1, ""); !errors.Is(err, baton.ErrInvalidName) {
		t.Errorf("empty name: %v", err)
	}
	tx1.Rollback(ctx)
	tx1, _ = pool.Begin(ctx)
	t1, err := LockRow(ctx, tx1, "row-a")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan baton.Token, 1)
	errc := make(chan error, 1)
	go func() {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tok, err := LockRow(ctx, tx, "row-a")
			got <- tok
			return err
		})
		errc <- err
	}()
	select {
	case tok := <-got:
		t.Fatalf("second transaction locked the row (token %d) while the first held it", tok)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case t2 := <-got:
		if t2 <= t1 {
			t.Errorf("token %d after %d", t2, t1)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second transaction never got the row")
	}
	// A context that ends while waiting rolls the waiter back.
	tx1, _ = pool.Begin(ctx)
	if _, err := LockRow(ctx, tx1, "row-a"); err != nil {
		t.Fatal(err)
	}
	tx2, _ := pool.Begin(ctx)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = LockRow(cctx, tx2, "row-a")
	cancel()
	if err == nil {
		t.Fatal("LockRow of a locked row returned before its context ended")
	}
	tx2.Rollback(ctx)
	tx1.Rollback(ctx)
}

// TestFencedUpdate: a stale holder's write is refused once a later holder
// wrote; a holder writes with its own token more than once.
func TestFencedUpdate(t *testing.T) {
	ctx := context.Background()
	pool := poolT(t)
	admin(t, "CREATE TABLE IF NOT EXISTS fenced_res (id int PRIMARY KEY, v text, fence bigint NOT NULL DEFAULT 0)")
	admin(t, "INSERT INTO fenced_res (id, v) VALUES (1, '') ON CONFLICT (id) DO UPDATE SET v = '', fence = 0")
	b := openT(t, need(t))
	m := mutexT(t, b, "fenced")
	h1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h2, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctx)
	for i := 0; i < 2; i++ {
		if n, err := FencedUpdate(ctx, pool, "fenced_res", "v = $1", "id = $2", h2.Token(), "new", 1); err != nil || n != 1 {
			t.Fatalf("write of the holder: %d rows, %v", n, err)
		}
	}
	if _, err := FencedUpdate(ctx, pool, "fenced_res", "v = $1", "id = $2", h1.Token(), "stale", 1); !errors.Is(err, baton.ErrLost) {
		t.Fatalf("write with a stale token: %v, want ErrLost", err)
	}
	var v string
	if err := pool.QueryRow(ctx, "SELECT v FROM fenced_res WHERE id = 1").Scan(&v); err != nil || v != "new" {
		t.Fatalf("row after the stale write: %q, %v", v, err)
	}
	if _, err := FencedUpdate(ctx, pool, "fenced_res", "v = $1", "id = $2", 0, "x", 1); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("token 0: %v", err)
	}
}
