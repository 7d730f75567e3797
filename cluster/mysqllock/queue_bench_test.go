package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// benchQueue opens a queue of a new name on the shared server, with a
// Backend of OpenURL (several statements per request).
func benchQueue(b *testing.B) baton.Queue {
	s := sharedServer(b)
	createDB(b, s, "baton")
	ctx := context.Background()
	bk, err := OpenURL(ctx, s.url(""))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bk.Close() })
	q, err := bk.Queue(ctx, fmt.Sprint("bench-queue-", time.Now().UnixNano()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q
}

// BenchmarkQueueUncontended: one goroutine putting, claiming (TryClaim)
// and acking one job at a time.
func BenchmarkQueueUncontended(b *testing.B) {
	q := benchQueue(b)
	ctx := context.Background()
	payload := []byte("job")
	for b.Loop() {
		if _, err := q.Put(ctx, payload); err != nil {
			b.Fatal(err)
		}
		j, err := q.TryClaim(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueueFloor is the raw floor of BenchmarkQueueUncontended on the
// same server: INSERT of a row, then SELECT ... FOR UPDATE SKIP LOCKED of
// it and its DELETE in one transaction, with no lease, token, key or
// wake-up.
func BenchmarkQueueFloor(b *testing.B) {
	s := sharedServer(b)
	createDB(b, s, "baton")
	ctx := context.Background()
	db, err := sql.Open("mysql", "root@tcp("+s.addr()+")/baton?interpolateParams=true")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS bench_floor (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload BLOB NOT NULL) ENGINE=InnoDB`); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := db.ExecContext(ctx, `INSERT INTO bench_floor (payload) VALUES (?)`, []byte("job")); err != nil {
			b.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		var id int64
		var p []byte
		if err := tx.QueryRowContext(ctx, `SELECT id, payload FROM bench_floor ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id, &p); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM bench_floor WHERE id = ?`, id); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueueParts times the Put, the Claim and the Ack of
// BenchmarkQueueUncontended apart (mean microseconds each).
func BenchmarkQueueParts(b *testing.B) {
	q := benchQueue(b)
	ctx := context.Background()
	payload := []byte("job")
	var tp, tc, ta time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := q.Put(ctx, payload); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		j, err := q.Claim(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := j.Ack(ctx); err != nil {
			b.Fatal(err)
		}
		tp, tc, ta = tp+t1.Sub(t0), tc+t2.Sub(t1), ta+time.Since(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tp.Microseconds())/n, "put-µs")
	b.ReportMetric(float64(tc.Microseconds())/n, "claim-µs")
	b.ReportMetric(float64(ta.Microseconds())/n, "ack-µs")
}
