package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// A name's row of the lock table lives only while the name is in use: the
// rows of Mutex and RWMutex names free for longer than the lease TTL are
// deleted by a sweep (a Semaphore's row, which holds its capacity, and
// LockRow's rows stay). A row carries its name's counter, so before rows
// are deleted the sweep raises the floor, the row of the empty key, to at
// least their tokens, and a row is created (ensureRow) with the floor as
// its counter, read under a shared row lock in the inserting statement: a
// sweep that deletes rows after raising the floor waits for that lock, so
// an insert either finds the row not yet deleted or reads the floor raised
// for it. Tokens of a name thus keep increasing across the deletion of its
// row; a claim adds at least one to the counter it finds.
//
// Deleting a free row is safe at any time; the idle time only spares names
// used again soon an insert. Each Backend sweeps once when it is set up and
// then an idle time after its releases, and stops when it has released
// nothing for an idle time.

// floorKey is the key of the floor row.
const floorKey = ""

// sweepBatch is the number of rows a sweep statement deletes.
const sweepBatch = 500

// ensureRow creates the lock table row of k if it is missing, with the
// floor as its counter; it reports whether it did.
func (b *backend) ensureRow(ctx context.Context, k string, capacity int64) (bool, error) {
	res, err := b.db.ExecContext(ctx, `INSERT IGNORE INTO `+b.t.lock+` (name, token, capacity, expires)
		SELECT ?, token, ?, UTC_TIMESTAMP(6) FROM `+b.t.lock+` WHERE name = '' LOCK IN SHARE MODE`, k, capacity)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// makeFloor creates the floor row at the highest counter of the table (the
// rows a version that kept every row left).
func (b *backend) makeFloor(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `INSERT IGNORE INTO `+b.t.lock+` (name, token)
		SELECT '', COALESCE(MAX(token), 0) FROM `+b.t.lock)
	return err
}

// raiseFloor raises the floor to at least tok.
func (b *backend) raiseFloor(ctx context.Context, tok uint64) error {
	_, err := b.db.ExecContext(ctx, `UPDATE `+b.t.lock+` SET token = GREATEST(token, ?) WHERE name = ''`, tok)
	return err
}

// idle is how long a free row is kept.
func (b *backend) idle() time.Duration { return b.c.TTL }

// sweep deletes the hold rows and Cond registrations whose lease ended
// longer than idle ago, and the rows of Mutex and RWMutex names free for
// longer than idle. Candidates
// are found by plain reads, which lock nothing; the deletes check again.
func (b *backend) sweep(ctx context.Context, idle time.Duration) error {
	us := idle.Microseconds()
	for {
		type hold struct{ name, owner string }
		var dead []hold
		rows, err := b.db.QueryContext(ctx, `SELECT name, owner FROM `+b.t.hold+`
			WHERE expires <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND LIMIT `+fmt.Sprint(sweepBatch), us)
		if err != nil {
			return err
		}
		for rows.Next() {
			var h hold
			if err := rows.Scan(&h.name, &h.owner); err != nil {
				rows.Close()
				return err
			}
			dead = append(dead, h)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, h := range dead {
			if _, err := b.db.ExecContext(ctx, `DELETE FROM `+b.t.hold+` WHERE name = ? AND owner = ?
				AND expires <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`, h.name, h.owner, us); err != nil {
				return err
			}
		}
		if len(dead) < sweepBatch {
			break
		}
	}
	// Cond registrations of waiters that died (live ones renew theirs).
	for {
		var ids []any
		rows, err := b.db.QueryContext(ctx, `SELECT id FROM `+b.t.cond+`
			WHERE expires <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND LIMIT `+fmt.Sprint(sweepBatch), us)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id uint64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) > 0 {
			if _, err := b.db.ExecContext(ctx, `DELETE FROM `+b.t.cond+` WHERE id IN (`+inList(len(ids))+`)
				AND expires <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`, append(ids, us)...); err != nil {
				return err
			}
		}
		if len(ids) < sweepBatch {
			break
		}
	}
	free := `expires <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND (name LIKE 'm:%' OR name LIKE 'r:%'
		AND NOT EXISTS (SELECT 1 FROM ` + b.t.hold + ` WHERE ` + b.t.hold + `.name = ` + b.t.lock + `.name))`
	for {
		rows, err := b.db.QueryContext(ctx, `SELECT name, token FROM `+b.t.lock+` WHERE `+free+` LIMIT `+fmt.Sprint(sweepBatch), us)
		if err != nil {
			return err
		}
		var names []any
		var hi uint64
		for rows.Next() {
			var k string
			var tok uint64
			if err := rows.Scan(&k, &tok); err != nil {
				rows.Close()
				return err
			}
			names, hi = append(names, k), max(hi, tok)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(names) == 0 {
			return nil
		}
		// The floor first, and committed: a row deleted then has a token
		// no higher than it. A row claimed since it was read has a running
		// lease or a later release time, and stays.
		if err := b.raiseFloor(ctx, hi); err != nil {
			return err
		}
		args := append(names, us, hi)
		if _, err := b.db.ExecContext(ctx, `DELETE FROM `+b.t.lock+` WHERE name IN (`+inList(len(names))+`) AND `+free+` AND token <= ?`, args...); err != nil {
			return err
		}
		if len(names) < sweepBatch {
			return nil
		}
	}
}

// janitor runs the sweeps of a Backend: one an idle time (and a quarter)
// after a release, again as long as releases came since.
type janitor struct {
	mu      sync.Mutex
	timer   *time.Timer // guarded by mu: set while a sweep is due
	last    time.Time   // guarded by mu: the last release
	stopped bool        // guarded by mu
	running sync.WaitGroup
}

// released notes a release through the Backend and makes sure a sweep is
// due.
func (b *backend) released() {
	j := &b.jan
	j.mu.Lock()
	defer j.mu.Unlock()
	j.last = time.Now()
	if j.timer == nil && !j.stopped {
		j.timer = time.AfterFunc(b.idle()+b.idle()/4, b.runSweep)
	}
}

func (b *backend) runSweep() {
	j := &b.jan
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		return
	}
	j.running.Add(1)
	start := time.Now()
	j.mu.Unlock()
	defer j.running.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 4*b.c.RequestTimeout)
	err := b.sweep(ctx, b.idle())
	cancel()
	if err != nil {
		b.c.Logger.Warn("baton: mysql: deleting the rows of idle names failed; trying again", "err", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.timer = nil
	// Rows released less than an idle time before this sweep began were
	// kept: sweep again once they are idle.
	if !j.stopped && (err != nil || j.last.After(start.Add(-b.idle()))) {
		j.timer = time.AfterFunc(max(time.Until(j.last.Add(b.idle()+b.idle()/4)), b.idle()/4), b.runSweep)
	}
}

// stop cancels the sweeps to come and waits for one that runs.
func (j *janitor) stop() {
	j.mu.Lock()
	j.stopped = true
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	j.mu.Unlock()
	j.running.Wait()
}
