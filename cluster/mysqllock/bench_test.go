package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
)

// BenchmarkUncontended compares an uncontended Lock+Unlock of a Mutex with
// its floor on the same server: GET_LOCK and RELEASE_LOCK on one
// connection, with no lease, token or row. The Mutex adds the row write of
// the claim and of the release in the same two round trips.
func BenchmarkUncontended(b *testing.B) {
	s := sharedServer(b)
	createDB(b, s, "baton")
	ctx := context.Background()
	if bk, err := OpenURL(ctx, s.url("")); err != nil { // creates the tables
		b.Fatal(err)
	} else {
		bk.Close()
	}
	b.Run("raw-get-lock", func(b *testing.B) {
		db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton?interpolateParams=true")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		c, err := db.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		name := fmt.Sprintf("bench-raw-%d", nameSeq.Add(1))
		b.ResetTimer()
		for b.Loop() {
			var got sql.NullInt64
			if err := c.QueryRowContext(ctx, `SELECT GET_LOCK(?, 0)`, name).Scan(&got); err != nil || got.Int64 != 1 {
				b.Fatal(err, got)
			}
			if err := c.QueryRowContext(ctx, `SELECT RELEASE_LOCK(?)`, name).Scan(&got); err != nil || got.Int64 != 1 {
				b.Fatal(err, got)
			}
		}
	})
	// The same two row writes as the Mutex's (take the row with a new
	// token, give it back), with no lease, GET_LOCK or core: what the row
	// that survives a killed connection costs on this server.
	b.Run("raw-row-writes", func(b *testing.B) {
		db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton?interpolateParams=true")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		c, err := db.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		name := fmt.Sprintf("bench-row-%d", nameSeq.Add(1))
		if _, err := c.ExecContext(ctx, "INSERT IGNORE INTO baton_lock (name) VALUES (?)", name); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.ExecContext(ctx, "UPDATE baton_lock SET token = token + 1, owner = 'x', expires = UTC_TIMESTAMP(6) + INTERVAL 10 SECOND WHERE name = ? AND owner = ''", name); err != nil {
				b.Fatal(err)
			}
			if _, err := c.ExecContext(ctx, "UPDATE baton_lock SET owner = '' WHERE name = ? AND owner = 'x'", name); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mutex", func(b *testing.B) {
		bk, err := OpenURL(ctx, s.url("ttl=10s"))
		if err != nil {
			b.Fatal(err)
		}
		defer bk.Close()
		m, err := bk.Mutex(ctx, fmt.Sprintf("bench-%d", nameSeq.Add(1)))
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
