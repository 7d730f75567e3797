package pglock_test

import (
	"context"
	"log"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/pglock"
	"github.com/jackc/pgx/v5"
)

// A lock taken inside the caller's own transaction: it is released with
// the transaction, and its token fences the rows written in it.
func ExampleLockRow() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://app@db.internal:5432/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	token, err := pglock.LockRow(ctx, tx, "invoice/42")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pglock.FencedUpdate(ctx, tx, "invoices", "state = $1", "id = $2", token, "paid", 42); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// By URL through baton.Open (postgres:// and postgresql://), with verified
// TLS from a private CA and the password from the environment.
func ExampleOpenURL() {
	ctx := context.Background()
	b, err := baton.Open(ctx, "postgres://app@db.internal:5432/locks?ca=/etc/ssl/db-ca.pem&password_env=PGPASSWORD_APP")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	rw, err := b.RWMutex(ctx, "index")
	if err != nil {
		log.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	defer rw.RUnlock(ctx)
}
