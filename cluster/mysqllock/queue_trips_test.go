package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// questions reads the server's count of statements received.
func questions(t *testing.T, admin *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := admin.QueryRow(`SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQueueRoundTrips counts the statements (each one round trip) of an
// uncontended Put+Claim+Ack: BEGIN, one counter statement that also learns
// whether claimants sleep, the INSERT and COMMIT; BEGIN, SELECT ... SKIP
// LOCKED, the token and job UPDATEs and COMMIT (the wake-up generation is
// read only when a claim comes back empty); the DELETE.
func TestQueueRoundTrips(t *testing.T) {
	s := sharedServer(t)
	db := openDB(t, s)
	queueOn(t, db, "trips-setup") // the tables
	// A raised floor (as a sweep leaves it) must not count as sleepers.
	if _, err := db.Exec("UPDATE `" + DefaultPrefix + "lock` SET token = GREATEST(token, 1000) WHERE name = ''"); err != nil {
		t.Fatal(err)
	}
	q := queueOn(t, db, fmt.Sprint("trips-", time.Now().UnixNano()))
	admin := s.admin(t)
	ctx := context.Background()
	const n, want = 40, 10
	cycle := func() {
		if _, err := q.Put(ctx, []byte("job")); err != nil {
			t.Fatal(err)
		}
		j, err := q.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // connections opened
	before := questions(t, admin)
	for range n {
		cycle()
	}
	// One for the second SHOW STATUS; the rest of the slack is for the
	// renewals and sweeps of the test's Backends, and other tests' ones.
	got := float64(questions(t, admin)-before-1) / n
	t.Logf("%.2f statements per Put+Claim+Ack", got)
	if got > want+0.5 {
		t.Fatalf("%.2f statements per Put+Claim+Ack, want %d", got, want)
	}
}

// TestQueueDrawIDs checks drawIDs' ids and its sleepers' answer with the
// rows missing, present, and with sleepers counted, for draws of none and
// of some ids.
func TestQueueDrawIDs(t *testing.T) {
	s := sharedServer(t)
	db := openDB(t, s)
	queueOn(t, db, "draw-setup") // the tables
	ctx := context.Background()
	lock := "`" + DefaultPrefix + "lock`"
	name := fmt.Sprint("draw-", time.Now().UnixNano())
	sleep := key('W', name)
	setSleepers := func(n int) {
		t.Helper()
		if _, err := db.Exec(`UPDATE `+lock+` SET token = ? WHERE name = ?`, n, sleep); err != nil {
			t.Fatal(err)
		}
	}
	draw := func(n int, sleepRow string, wantLast uint64, wantSleepers bool) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		last, sleepers, err := drawIDs(ctx, tx, lock, name, n, sleepRow)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if last != wantLast || sleepers != wantSleepers {
			t.Fatalf("drawIDs(%d, %q) = %d, %v; want %d, %v", n, sleepRow, last, sleepers, wantLast, wantSleepers)
		}
	}
	draw(2, sleep, 0, false) // both rows inserted
	draw(3, sleep, 2, false)
	draw(0, sleep, 5, false)
	setSleepers(1)
	draw(1, sleep, 5, true)
	draw(1, sleep, 6, true) // the toggle changes the row back
	draw(0, sleep, 7, true)
	draw(2, "", 7, false) // no sleepers' row: no answer
	setSleepers(0)
	draw(1, sleep, 9, false)
	draw(0, sleep, 10, false)
	other := fmt.Sprint("draw-other-", time.Now().UnixNano())
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if last, _, err := drawIDs(ctx, tx, lock, other, 0, ""); err != nil || last != 0 {
		t.Fatalf("drawIDs of a new queue, none drawn = %d, %v; want 0", last, err)
	}
}

// countingNet is a network for the driver whose connections count the
// requests they write (one write each, for requests this small).
var (
	countingOnce   sync.Once
	countingWrites atomic.Int64
)

type countingConn struct{ net.Conn }

func (c countingConn) Write(b []byte) (int, error) {
	countingWrites.Add(1)
	return c.Conn.Write(b)
}

// openMultiDB opens the server's database with the options OpenURL sets
// (arguments interpolated, several statements per request), over
// connections that count their requests.
func openMultiDB(t *testing.T, s *server) *sql.DB {
	t.Helper()
	countingOnce.Do(func() {
		mysql.RegisterDialContext("counted", func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c}, nil
		})
	})
	createDB(t, s, "baton")
	db, err := sql.Open("mysql", "root@counted("+s.addr()+")/baton?timeout=2s&interpolateParams=true&multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestQueueRoundTripsMulti counts the requests of an uncontended
// Put+Claim+Ack on connections that take several statements per request:
// the Put's transaction in one, the Claim's in one, the Ack's DELETE.
func TestQueueRoundTripsMulti(t *testing.T) {
	s := sharedServer(t)
	db := openMultiDB(t, s)
	queueOn(t, db, "trips-multi-setup")
	q := queueOn(t, db, fmt.Sprint("trips-multi-", time.Now().UnixNano()))
	ctx := context.Background()
	const n, want = 40, 3
	cycle := func(i int) {
		id, err := q.Put(ctx, []byte(fmt.Sprint("job ", i)))
		if err != nil {
			t.Fatal(err)
		}
		j, err := q.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if j.ID() != id || string(j.Payload()) != fmt.Sprint("job ", i) || j.Attempt() != 1 {
			t.Fatalf("claimed job %d %q attempt %d, want job %d %q attempt 1", j.ID(), j.Payload(), j.Attempt(), id, fmt.Sprint("job ", i))
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle(0) // connections opened
	admin := s.admin(t)
	before, stmts := countingWrites.Load(), questions(t, admin)
	for i := range n {
		cycle(i + 1)
	}
	got := float64(countingWrites.Load()-before) / n
	t.Logf("%.2f requests per Put+Claim+Ack", got)
	if got > want+0.5 {
		t.Fatalf("%.2f requests per Put+Claim+Ack, want %d", got, want)
	}
	// Every statement of a request is work for the server and an answer
	// for the client to read: the Put's five (START TRANSACTION, the
	// counter, the read of its outcome, the INSERT, COMMIT), the Claim's
	// seven (START TRANSACTION, the variables set, the pick, the counter,
	// the claim, the answer, COMMIT), the Ack's DELETE.
	const wantStmts = 13
	gotStmts := float64(questions(t, admin)-stmts-1) / n
	t.Logf("%.2f statements per Put+Claim+Ack", gotStmts)
	if gotStmts > wantStmts+0.5 {
		t.Fatalf("%.2f statements per Put+Claim+Ack, want %d", gotStmts, wantStmts)
	}
}

// A request of several statements that fails half-way changes nothing:
// its transaction is rolled back before the connection goes back to the
// pool. Here the Put's INSERT fails (its table is away) after the counter
// moved; the counter is back, and the next Put takes the next id.
func TestQueueMultiFailsWhole(t *testing.T) {
	s := sharedServer(t)
	db := openMultiDB(t, s)
	ctx := context.Background()
	const prefix = "multifail_"
	b, err := New(ctx, db, lease.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q, err := b.Queue(ctx, fmt.Sprint("multi-fail-", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	before := countingWrites.Load()
	first, err := q.Put(ctx, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if n := countingWrites.Load() - before; n != 1 {
		t.Fatalf("a Put took %d requests, want 1 (several statements per request)", n)
	}
	admin := s.admin(t)
	job, away := "baton.`"+prefix+"job`", "baton.`"+prefix+"job_away`"
	if _, err := admin.Exec("RENAME TABLE " + job + " TO " + away); err != nil {
		t.Fatal(err)
	}
	for range 8 { // more than the pool keeps idle
		if _, err := q.Put(ctx, []byte("b")); err == nil {
			t.Fatal("a Put without its table succeeded")
		}
	}
	if _, err := admin.Exec("RENAME TABLE " + away + " TO " + job); err != nil {
		t.Fatal(err)
	}
	next, err := q.Put(ctx, []byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	if next != first+1 {
		t.Errorf("the Put after the failed ones got id %d, want %d: a failed request's counter stayed", next, first+1)
	}
}

// TestQueueClaimOneFailsWhole: a one-request claim that finds the queue's
// token row gone claims nothing, says why, and leaves the job ready for
// the claim after the row is back.
func TestQueueClaimOneFailsWhole(t *testing.T) {
	s := sharedServer(t)
	db := openMultiDB(t, s)
	ctx := context.Background()
	b, err := New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	name := fmt.Sprint("claim-one-fail-", time.Now().UnixNano())
	q, err := b.Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	id, err := q.Put(ctx, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	admin := s.admin(t)
	if _, err := admin.Exec("DELETE FROM baton.`"+DefaultPrefix+"lock` WHERE name = ?", key('q', name)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.TryClaim(ctx); err == nil || !strings.Contains(err.Error(), "token row") {
		t.Fatalf("TryClaim without the token row: %v", err)
	}
	if st, err := q.Stats(ctx); err != nil || st != (baton.QueueStats{Ready: 1}) {
		t.Fatalf("Stats after the failed claim = %+v, %v; want one ready", st, err)
	}
	again, err := b.Queue(ctx, name) // makes the row again
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	j, err := q.TryClaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID() != id || j.Attempt() != 1 || j.Token() == 0 {
		t.Fatalf("claimed job %d attempt %d token %d; want job %d, attempt 1", j.ID(), j.Attempt(), j.Token(), id)
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
