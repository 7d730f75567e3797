package mysqllock_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/mysqllock"
)

// Open by URL (baton.Open accepts mysql:// and mysql+unix:// once the
// package is imported), with the password in a file, and fence the writes
// of the hold into the guarded table: a write under an older token than the
// last one written is refused with baton.ErrLost.
func ExampleOpenURL() {
	ctx := context.Background()
	b, err := mysqllock.OpenURL(ctx, "mysql://app@db.internal:3306/locks?password_file=/run/secrets/db&ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	m, err := b.Mutex(ctx, "invoice/42")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	hold, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	db, err := sql.Open("mysql", "app@tcp(db.internal:3306)/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := mysqllock.FencedUpdate(ctx, db, "invoices", "state = ?", "id = ?", hold.Token(), "paid", 42); err != nil {
		log.Fatal(err) // baton.ErrLost: a later holder has written the row
	}
}

// The same through the registry, as a program that takes its backend URL
// from its configuration does.
func Example_open() {
	ctx := context.Background()
	b, err := baton.Open(ctx, "mysql://app@db.internal/locks?password_env=DB_PASSWORD&ca=/etc/ssl/db-ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
}
