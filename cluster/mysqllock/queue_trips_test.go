package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
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
